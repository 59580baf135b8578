#!/usr/bin/env node
// The static checks of `npm test` (npm run check): ESLint and Prettier, then the three TypeScript
// checks of `npm run typecheck`, all at once. Each runs in its own process; their outputs are
// printed one after another, whole, as each ends, and the script fails when any of them failed.
// On the two cores of a CI machine this takes about 60% of running them one by one (each is
// single-threaded for most of its run).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => path.join(ROOT, 'node_modules', '.bin', name);

const CHECKS = [
  ['eslint', bin('eslint'), ['src']],
  ['prettier', bin('prettier'), ['--check', 'src', 'test', 'web/src', 'sdk/typescript', 'bench', 'loadtest']],
  ['tsc', bin('tsc'), ['--noEmit']],
  ['tsc (uws-legacy)', bin('tsc'), ['--noEmit', '-p', 'tsconfig.uws-legacy.json']],
  ['web typecheck', 'npm', ['run', '--silent', 'typecheck', '-w', 'web']],
];

function run([name, cmd, args]) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => out.push(b));
    const done = (ok, extra = '') => {
      const text = Buffer.concat(out).toString('utf8').trimEnd();
      const took = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${name} (${took} s)${extra}\n${text ? `${text}\n` : ''}`);
      resolve(ok);
    };
    child.on('error', (err) => done(false, `: ${err.message}`));
    child.on('close', (code, signal) => done(code === 0, code === 0 ? '' : `: exit ${code ?? signal}`));
  });
}

const results = await Promise.all(CHECKS.map(run));
process.exit(results.every(Boolean) ? 0 : 1);
