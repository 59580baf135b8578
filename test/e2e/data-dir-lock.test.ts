// One Keywarden owns a DATA_DIR's embedded PostgreSQL at a time (DATA_DIR/keywarden.lock): a
// second `serve` is refused with a clear message and takes nothing down, `owner create` uses the
// running server's database, and a lock left by a killed process never blocks the next start.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { spawnServer, type ServerProcess, freePort } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const root = path.resolve(import.meta.dirname, '../..');
/** Per test: real processes and initdb on a shared 2-core machine. */
const SLOW = 60_000;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-lock-'));
const env = {
  DATA_DIR: dataDir,
  DATABASE_URL: '',
  REDIS_URL: '',
  OWNER_USERNAME: 'boss',
  OWNER_PASSWORD: 'boss-pass-123',
};
const servers: ServerProcess[] = [];
const commands: ChildProcess[] = [];

afterAll(async () => {
  for (const c of commands) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of servers) await s.stop('SIGKILL');
  // Whatever a killed server left running on these files goes with them.
  const pid = postmasterPid();
  if (pid)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function serve(): Promise<ServerProcess> {
  const s = await spawnServer(env);
  servers.push(s);
  return s;
}

function postmasterPid(): number | undefined {
  try {
    return Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}

/** `keywarden <args>` to completion: exit code and everything it printed. */
function keywarden(args: string[], input = '', limitMs = 60_000): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), ...args], {
    cwd: root,
    env: {
      ...process.env,
      ...env,
      OWNER_USERNAME: '',
      OWNER_PASSWORD: '',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    },
  });
  commands.push(child);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  child.stdin.end(input);
  // A `serve` that was wrongly let through would keep running: bound it.
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    }),
  );
}

/** The server still serves: ready, and a dashboard write goes through. */
async function stillServes(api: Api, name: string): Promise<void> {
  expect((await api.get('/readyz')).status).toBe(200);
  const r = await api.post('/apps', { name });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}

describe('DATA_DIR ownership', () => {
  let first: ServerProcess;
  let api: Api;

  it(
    'refuses a second serve on a busy DATA_DIR with a clear message; the first keeps serving',
    async () => {
      first = await serve();
      api = await new Api(first.base).signIn('boss', 'boss-pass-123');
      await stillServes(api, 'First');

      const second = await keywarden(['serve'], '', 20_000);
      expect(second.code).not.toBe(0);
      expect(second.code, 'the second serve kept running').not.toBeNull();
      expect(second.out).toContain(
        `DATA_DIR ${dataDir} is in use by Keywarden process ${first.child.pid}; stop it first or use another DATA_DIR`,
      );
      await stillServes(api, 'After second serve');
    },
    SLOW,
  );

  it(
    'owner create while the server runs uses its database and takes nothing down',
    async () => {
      first ??= await serve();
      api ??= await new Api(first.base).signIn('boss', 'boss-pass-123');
      const created = await keywarden(
        ['owner', 'create', '--username', 'deputy', '--password-stdin'],
        'deputy-pass-123\n',
      );
      expect(created.out).toContain('owner deputy created');
      expect(created.code).toBe(0);
      await stillServes(api, 'After owner create');
      // Same database: the account made by the command line signs in on the running server.
      await new Api(first.base).signIn('deputy', 'deputy-pass-123');
      expect(first.child.exitCode).toBeNull();
    },
    SLOW,
  );

  it(
    'a lock left by a killed Keywarden (or naming a reused PID) does not block the next start',
    async () => {
      for (const s of servers) await s.stop('SIGKILL'); // the lock and a running postmaster stay behind
      const orphan = postmasterPid()!;
      expect(() => process.kill(orphan, 0)).not.toThrow();

      const next = await serve();
      await stillServes(await new Api(next.base).signIn('boss', 'boss-pass-123'), 'After a SIGKILL');
      expect(() => process.kill(orphan, 0)).toThrow(); // the orphan was stopped, our own server runs
      expect(postmasterPid()).not.toBe(orphan);

      // PID 1 is alive but did not write this lock (its start time differs): stale all the same.
      await next.stop('SIGKILL');
      fs.writeFileSync(path.join(dataDir, 'keywarden.lock'), JSON.stringify({ pid: 1, start: '1' }));
      const last = await serve();
      await stillServes(await new Api(last.base).signIn('boss', 'boss-pass-123'), 'After a reused PID');
      expect(await last.stop('SIGTERM')).toBe(0);
      expect(fs.existsSync(path.join(dataDir, 'keywarden.lock'))).toBe(false);
    },
    SLOW,
  );
});

const hasRedis = await redisAvailable();

describe.skipIf(!hasRedis)('DATA_DIR ownership with WORKERS=2', () => {
  // The DATA_DIR of the tests above, stopped cleanly by the last one: no initdb to wait for.
  it(
    'the supervisor holds DATA_DIR and restarts its database; the workers recover',
    async () => {
      const primary = await spawnServer({
        ...env,
        WORKERS: '2',
        PORT: String(await freePort()),
        REDIS_URL,
        REDIS_PREFIX: `kwlock${Date.now()}:`,
      });
      servers.push(primary);
      const api = await new Api(primary.base).signIn('boss', 'boss-pass-123');
      await stillServes(api, 'Workers');

      const second = await keywarden(['serve'], '', 20_000);
      expect(second.out).toContain(
        `DATA_DIR ${dataDir} is in use by Keywarden process ${primary.child.pid}; stop it first`,
      );
      expect(second.code).not.toBe(0);

      // The supervisor, not a worker, starts the database again; the workers' pools reconnect.
      const dead = postmasterPid()!;
      process.kill(dead, 'SIGKILL');
      const killedAt = Date.now();
      let status = 0;
      while (Date.now() - killedAt < 10_000) {
        status = (await api.post('/apps', { name: `Workers ${Date.now()}` })).status;
        expect([200, 503]).toContain(status);
        if (status === 200 && postmasterPid() !== dead) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe(200);
      expect(Date.now() - killedAt).toBeLessThan(5_000);
      await stillServes(api, 'Workers after the restart');
      expect(await primary.stop('SIGTERM')).toBe(0);
      expect(fs.existsSync(path.join(dataDir, 'keywarden.lock'))).toBe(false);
    },
    SLOW,
  );
});
