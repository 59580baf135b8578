// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with .d.ts, using the TypeScript
// compiler found in this package's or any parent's node_modules (the repository root pins it).
// dist/cjs gets its own package.json {"type":"commonjs"} so Node reads those .js files as CJS.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'package.json'));
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  console.error('build: the typescript compiler is not installed (npm install --save-dev typescript)');
  process.exit(1);
}
fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
for (const cfg of ['tsconfig.esm.json', 'tsconfig.cjs.json']) {
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(root, cfg)], { stdio: ['ignore', 2, 2], cwd: root });
  } catch {
    console.error(`build: tsc -p ${cfg} failed`);
    process.exit(1);
  }
}
fs.writeFileSync(path.join(root, 'dist/cjs/package.json'), '{ "type": "commonjs" }\n');
console.error('build: dist/esm and dist/cjs written');
