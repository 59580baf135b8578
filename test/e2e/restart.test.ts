// Restarts under load: heartbeat clients keep beating while the service is restarted, and count
// the sessions lost and the beats refused. A graceful restart loses neither, one process alone
// (sessions checkpointed to PostgreSQL on shutdown, restored at start) and a cluster (sessions in
// Redis). A crash of one process loses only what changed after its last checkpoint: once the
// checkpoint holds a session's latest token, a SIGKILL costs that session nothing.
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi } from '../helpers/client.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { decodeHeartbeat } from '../../src/modules/heartbeat/heartbeat-codec.js';

const CLIENTS = 24;
/** Emits 'ok' after every accepted beat, so a test can await a condition on the chains. */
const progress = new EventEmitter();

function until(cond: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (cond()) return resolve();
    const check = () => {
      if (!cond()) return;
      progress.off('ok', check);
      resolve();
    };
    progress.on('ok', check);
  });
}

interface Chain {
  c: ClientApi;
  session: string;
  token: string;
  index: number;
  ok: number;
  okAfterRestart: number;
  refused: number;
  unavailable: number;
  refusal?: string;
}

/** One beat: 'ok' (token moved on), 'refused' (403: the chain is lost) or 'retry' (503, no connection). */
async function beat(ch: Chain): Promise<'ok' | 'refused' | 'retry'> {
  let r;
  try {
    r = await ch.c.post('/api/client/heartbeat', {
      session: ch.session,
      token: ch.token,
      system_id: 'restart-system-1',
      beat_index: ch.index + 1,
      code_hash: 'ab'.repeat(32),
      code_size: 1024,
    });
  } catch {
    return 'retry'; // connection refused or reset while the service restarts
  }
  if (r.status === 200) {
    ch.token = r.body.new_token;
    ch.index++;
    ch.ok++;
    progress.emit('ok');
    return 'ok';
  }
  if (r.status === 503 || r.status === 429) {
    ch.unavailable++;
    return 'retry';
  }
  ch.refused++;
  ch.refusal = `${r.status} ${JSON.stringify(r.body)}`;
  return 'refused';
}

async function openChains(base: string, owner: Api): Promise<Chain[]> {
  const app = (await owner.post('/apps', { name: `Restart ${Date.now()}` })).body;
  await owner.patch(`/apps/${app.id}`, { heartbeat_interval: 300 });
  const keys = (await owner.post(`/apps/${app.id}/licenses`, { amount: CLIENTS, duration: 30 })).body.map(
    (k: { key: string }) => k.key,
  );
  return Promise.all(
    keys.map(async (key: string, i: number) => {
      const c = new ClientApi(base);
      c.extraHeaders['x-forwarded-for'] = `198.51.100.${i + 1}`;
      const session = (await c.post('/api/client/init', { api_key: app.api_key, version: app.version })).body.session;
      expect((await c.post('/api/client/license', { session, license: key, hwid: `restart-hwid-${i}` })).status).toBe(
        200,
      );
      const start = await c.post('/api/client/heartbeat/start', { session, system_id: 'restart-system-1' });
      expect(start.status).toBe(200);
      const ch: Chain = {
        c,
        session,
        token: start.body.token,
        index: 0,
        ok: 0,
        okAfterRestart: 0,
        refused: 0,
        unavailable: 0,
      };
      expect(await beat(ch)).toBe('ok');
      return ch;
    }),
  );
}

/**
 * Every chain beats back to back (retrying what could not be delivered, with the same index and
 * token, as the SDKs do) until `done` resolves and it has had `after` accepted beats since
 * `restarted` resolved; a refused beat ends its chain.
 */
async function load(chains: Chain[], restarted: Promise<void>, after: number): Promise<void> {
  let up = false;
  void restarted.then(() => {
    up = true;
  });
  await Promise.all(
    chains.map(async (ch) => {
      for (;;) {
        const r = await beat(ch);
        if (r === 'refused') return;
        if (r === 'ok' && up && ++ch.okAfterRestart >= after) return;
        if (r === 'retry') await new Promise((res) => setTimeout(res, 50)); // a client's retry backoff
      }
    }),
  );
}

function report(chains: Chain[]) {
  return {
    lost: chains.filter((c) => c.refused > 0).length,
    refused: chains.reduce((n, c) => n + c.refused, 0),
    refusals: chains.flatMap((c) => (c.refusal ? [c.refusal] : [])).slice(0, 3),
  };
}

const hasRedis = await redisAvailable();
const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
const servers: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});
afterAll(async () => {
  for (const d of drops) await d();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function environment(extra: Record<string, string> = {}) {
  const db = await createTestDatabase();
  drops.push(db.drop);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-restart-'));
  dirs.push(dataDir);
  return {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    PORT: String(await freePort()),
    TRUSTED_PROXIES: '127.0.0.1',
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
    ...extra,
  };
}

async function start(env: Record<string, string>): Promise<ServerProcess> {
  const s = await spawnServer(env);
  servers.push(s);
  return s;
}

/**
 * Starts a server on `env`, opens the chains, and restarts it gracefully while every chain is
 * beating; returns the chains once each has had three accepted beats after the restart.
 */
async function gracefulRestartUnderLoad(
  env: Record<string, string>,
): Promise<{ chains: Chain[]; second: ServerProcess }> {
  const first = await start(env);
  const chains = await openChains(first.base, await new Api(first.base).signIn(OWNER.username, OWNER.password));
  let restarted!: () => void;
  const running = load(chains, new Promise<void>((r) => (restarted = r)), 3);
  await until(() => chains.every((ch) => ch.ok >= 3));
  expect(await first.stop('SIGTERM')).toBe(0);
  expect(first.output.join('\n')).not.toContain('http.unhandled_error');
  const second = await start(env);
  restarted();
  await running;
  return { chains, second };
}

describe('a restart under load', () => {
  it('one process, graceful: no session lost, no beat refused', async () => {
    const { chains, second } = await gracefulRestartUnderLoad(await environment());
    expect(second.output.join('\n')).toMatch(/"restored":\d+[^\n]*state\.restored/);
    expect(report(chains)).toEqual({ lost: 0, refused: 0, refusals: [] });
    expect(chains.every((c) => c.okAfterRestart >= 3)).toBe(true);
  }, 120_000);

  it('one process, SIGKILL: a session whose latest token was checkpointed goes on', async () => {
    const env = await environment({ STATE_CHECKPOINT_MS: '200' });
    const first = await start(env);
    const chains = await openChains(first.base, await new Api(first.base).signIn(OWNER.username, OWNER.password));
    for (const ch of chains) expect(await beat(ch)).toBe('ok');
    // Wait (an awaited condition, not a fixed time) until the checkpoint holds every latest token.
    const db = new pg.Client({ connectionString: env.DATABASE_URL });
    await db.connect();
    try {
      for (;;) {
        const rows = (
          await db.query<{ key: string; value: Buffer }>("select key, value from process_state where kind = 'hb'")
        ).rows;
        const saved = new Map(rows.map((r) => [r.key, decodeHeartbeat(r.value).token]));
        if (chains.every((ch) => saved.get(ch.session) === ch.token)) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await db.end();
    }
    await first.stop('SIGKILL');
    await start(env);
    for (const ch of chains) expect(await beat(ch), ch.refusal).toBe('ok');
    expect(report(chains).lost).toBe(0);
  }, 120_000);

  it.skipIf(!hasRedis)(
    'a cluster of two workers, graceful: no session lost, no beat refused',
    async () => {
      const env = await environment({ WORKERS: '2', REDIS_URL, REDIS_PREFIX: `kwrestart${Date.now()}:` });
      const { chains } = await gracefulRestartUnderLoad(env);
      expect(report(chains)).toEqual({ lost: 0, refused: 0, refusals: [] });
    },
    120_000,
  );
});
