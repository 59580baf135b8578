// The README's walk-through from a clone to a licensed program, run as written: the blocks are read from
// README.md (after their `<!-- walkthrough: ... -->` markers), so the README and this test cannot drift.
// The start block's variables start a real server on a free port (the harness does what `npm start` does,
// without the build); the steps block runs unchanged in bash, with KW pointing at that server, in a scratch
// folder holding a copy of sdk/typescript (so its build does not race the SDK's own tests).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const root = path.resolve(import.meta.dirname, '../..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');

/** The first fenced block after `<!-- walkthrough: NAME ... -->`, or after `after` for an unmarked one. */
function block(after: string): string {
  const at = readme.indexOf(after);
  if (at < 0) throw new Error(`README.md has no ${after}`);
  const m = /```[a-z]*\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!m) throw new Error(`README.md has no fenced block after ${after}`);
  return m[1]!;
}

/** `A=1 B='two words' npm start` -> {A: '1', B: 'two words'}. */
function startVariables(start: string): Record<string, string> {
  const line = start.split('\n').find((l) => /\bnpm start\b/.test(l));
  if (!line) throw new Error('the start block runs no `npm start`');
  const vars: Record<string, string> = {};
  for (const m of line.slice(0, line.indexOf('npm start')).matchAll(/(\w+)=(?:'([^']*)'|"([^"]*)"|(\S+))/g)) {
    vars[m[1]!] = m[2] ?? m[3] ?? m[4]!;
  }
  return vars;
}

describe("README.md's walk-through: clone, start, owner, app, key, the TypeScript SDK activating it and beating", () => {
  let server: TestServer;
  let scratch: string;

  beforeAll(async () => {
    const start = block('<!-- walkthrough: start');
    expect(start).toMatch(/^npm ci$/m);
    server = await startTestServer(startVariables(start));
    // What the steps need of the clone: sdk/typescript (without a previous build) and node_modules.
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-readme-'));
    fs.cpSync(path.join(root, 'sdk/typescript'), path.join(scratch, 'sdk/typescript'), {
      recursive: true,
      filter: (src) => !/[/\\](dist|node_modules)$/.test(src),
    });
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(scratch, 'node_modules'), 'dir');
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('the start block names an owner, which the server creates', () => {
    const vars = startVariables(block('<!-- walkthrough: start'));
    expect(Object.keys(vars).sort()).toEqual(['OWNER_PASSWORD', 'OWNER_USERNAME']);
  });

  it('the steps run as written and print what the README says they print', async () => {
    const steps = block('<!-- walkthrough: steps');
    const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', steps], {
      cwd: scratch,
      env: { ...process.env, KW: server.base },
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(stdout).toMatch(/^license key: KW-[A-Za-z0-9]{4}-[A-Za-z0-9]{4}-[A-Za-z0-9]{4}$/m);
    // The README's sample output, line by line; only the expiry date differs from run to run.
    const printed = block('The last command prints:').trim().split('\n');
    const got = stdout.trim().split('\n').slice(1); // after the key's line
    expect(got.map((l) => l.replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/, 'DATE'))).toEqual(
      printed.map((l) => l.replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/, 'DATE')),
    );
  }, 300_000);
});
