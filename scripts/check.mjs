#!/usr/bin/env node
// The static checks, the one list of them: `npm run check` (the first half of `npm test`) runs all,
// `npm run lint` the group `lint` (ESLint over src/ and, in a second process, over the rest; Prettier),
// `npm run typecheck` the group `typecheck` (src/ against both uWebSockets.js builds' definitions, the
// dashboard). The checks chosen run at once, each
// in its own process; their outputs are printed one after another, whole, as each ends, and the script
// fails when any of them failed. On the two cores of a CI machine they take about 60% of running them
// one by one (each is single-threaded for most of its run).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => path.join(ROOT, 'node_modules', '.bin', name);

const CHECKS = [
  ['lint', 'eslint', bin('eslint'), ['src']],
  // The rest in a second process, beside the first: tests, dashboard, benchmarks, load tester, TypeScript SDK.
  [
    'lint',
    'eslint (test, web, bench, loadtest, sdk)',
    bin('eslint'),
    ['test', 'web', 'bench', 'loadtest', 'sdk/typescript'],
  ],
  ['lint', 'prettier', bin('prettier'), ['--check', 'src', 'test', 'web/src', 'sdk/typescript', 'bench', 'loadtest']],
  ['typecheck', 'tsc', bin('tsc'), ['--noEmit']],
  ['typecheck', 'tsc (uws-legacy)', bin('tsc'), ['--noEmit', '-p', 'tsconfig.uws-legacy.json']],
  ['typecheck', 'web typecheck', 'npm', ['run', '--silent', 'typecheck', '-w', 'web']],
];
const groups = process.argv.slice(2);
const unknown = groups.filter((g) => !CHECKS.some(([group]) => group === g));
if (unknown.length > 0) {
  console.error(`unknown group: ${unknown.join(', ')} (lint, typecheck)`);
  process.exit(2);
}

function run([, name, cmd, args]) {
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

const chosen = CHECKS.filter(([group]) => groups.length === 0 || groups.includes(group));
const results = await Promise.all(chosen.map(run));
process.exit(results.every(Boolean) ? 0 : 1);
