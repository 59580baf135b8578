// Redis outages, with real processes: a Keywarden server on a Redis of its own
// that the test stalls (SIGSTOP), kills and restarts. Stalled or gone, Redis costs 503 with
// Retry-After (signed on client routes) and a fast /readyz 503, never a 500 or a hang; an
// AOF-persisted Redis comes back with every heartbeat session continuing its chain.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { spawnServer, type ServerProcess, freePort } from '../helpers/process.js';
import { requireToolchain } from '../helpers/toolchain.js';

const REDIS_SERVER = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
const hasRedisServer = requireToolchain('redis-server (Debian package redis-server)', REDIS_SERVER !== '');
const SYS = 'redis-fault-system';
const HASH = 'c0ffee00'.repeat(4);

interface RedisProc {
  port: number;
  url: string;
  proc: ChildProcess;
  kill(): Promise<void>;
}

async function startRedis(dir: string, port: number, aof: boolean): Promise<RedisProc> {
  const proc = spawn(
    REDIS_SERVER,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--dir',
      dir,
      '--daemonize',
      'no',
      '--appendonly',
      aof ? 'yes' : 'no',
      '--appendfsync',
      'always',
      '--logfile',
      '',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => {
          s.write('PING\r\n');
        });
        s.once('data', (d) => {
          s.destroy();
          resolve(d.toString().startsWith('+PONG'));
        });
        s.once('error', () => resolve(false));
      }),
    10_000,
  );
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    proc,
    kill: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function setup(aof: boolean) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-redis-'));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  let redis = await startRedis(dir, port, aof);
  cleanups.push(() => redis.kill());
  const db = await createTestDatabase();
  cleanups.push(db.drop);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-redis-data-'));
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const server: ServerProcess = await spawnServer({
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'kwf:',
    DATA_DIR: dataDir,
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
  });
  cleanups.push(async () => void (await server.stop('SIGKILL')));
  const owner = await new Api(server.base).signIn(OWNER.username, OWNER.password);
  const app = (await owner.post('/apps', { name: 'Redis faults' })).body;
  await owner.patch(`/apps/${app.id}`, { heartbeat_interval: 30 });
  const keys: string[] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 5, duration: 1 })).body.map(
    (k: { key: string }) => k.key,
  );
  return {
    server,
    owner,
    app,
    keys,
    get redis() {
      return redis;
    },
    restartRedis: async () => {
      redis = await startRedis(dir, port, aof);
    },
  };
}

/** An activated client with a running heartbeat chain. */
async function liveClient(base: string, apiKey: string, key: string) {
  const c = new ClientApi(base);
  const session = (await c.post('/api/client/init', { api_key: apiKey })).body.session as string;
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(7) })).status).toBe(200);
  const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
  expect(start.status).toBe(200);
  let token = start.body.token as string;
  let index = 0;
  return {
    c,
    session,
    async beat() {
      const r = await c.post('/api/client/heartbeat', {
        session,
        token,
        system_id: SYS,
        beat_index: index + 1,
        code_hash: HASH,
      });
      if (r.status === 200) {
        token = r.body.new_token;
        index++;
      }
      return r;
    },
  };
}

describe.skipIf(!hasRedisServer)('Redis faults', () => {
  it('warns at start when Redis keeps nothing; stalled or killed, it costs 503 with Retry-After, never 500', async () => {
    const s = await setup(false);
    expect(s.server.output.join('\n')).toContain('redis.no_persistence');
    const client = await liveClient(s.server.base, s.app.api_key, s.keys[0]!);
    expect((await client.beat()).status).toBe(200);

    s.redis.proc.kill('SIGSTOP');
    try {
      const t0 = Date.now();
      const ready = await fetch(`${s.server.base}/readyz`);
      expect(ready.status).toBe(503);
      expect(Date.now() - t0).toBeLessThan(2_500);
      expect(Number(ready.headers.get('retry-after'))).toBeGreaterThan(0);
      const c = new ClientApi(s.server.base);
      const init = await c.post('/api/client/init', { api_key: s.app.api_key }); // verified: signed
      expect(init.status).toBe(503);
      expect(init.body).toEqual({ detail: 'Service unavailable' });
      expect(Number(init.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      s.redis.proc.kill('SIGCONT');
    }
    await waitFor(async () => (await fetch(`${s.server.base}/readyz`)).status === 200);

    await s.redis.kill();
    const during = await Promise.all(
      Array.from({ length: 4 }, () =>
        new ClientApi(s.server.base).post('/api/client/init', { api_key: s.app.api_key }),
      ),
    );
    for (const r of during) {
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).not.toBeNull();
    }
    expect((await fetch(`${s.server.base}/readyz`)).status).toBe(503);
    await s.restartRedis();
    await waitFor(async () => (await fetch(`${s.server.base}/readyz`)).status === 200);
    expect((await new ClientApi(s.server.base).post('/api/client/init', { api_key: s.app.api_key })).status).toBe(200);
    expect(s.server.output.join('\n')).not.toContain('http.unhandled_error');
  }, 90_000);

  it('an AOF-persisted Redis restarted under a running server: every heartbeat session continues', async () => {
    const s = await setup(true);
    expect(s.server.output.join('\n')).not.toContain('redis.no_persistence');
    const clients = await Promise.all(s.keys.slice(0, 3).map((k) => liveClient(s.server.base, s.app.api_key, k)));
    for (const cl of clients) expect((await cl.beat()).status).toBe(200);
    await s.redis.kill();
    // A beat while Redis is gone cannot be made durable: a signed 503, and it did not happen (the
    // same beat, sent again once Redis is back, is accepted as the second).
    const during = await clients[0]!.beat();
    expect(during.status, JSON.stringify(during.body)).toBe(503);
    await s.restartRedis();
    await waitFor(async () => (await fetch(`${s.server.base}/readyz`)).status === 200);
    for (const cl of clients) {
      const r = await cl.beat();
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.beat_count).toBe(2);
    }
    // The client sessions themselves survived too: an auth call on the same session still works.
    expect(
      (
        await clients[0]!.c.post('/api/client/license', {
          session: clients[0]!.session,
          license: s.keys[0],
          hwid: hwid(7),
        })
      ).status,
    ).toBe(200);
  }, 90_000);
});
