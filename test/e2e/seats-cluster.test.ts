// Floating seats across workers (docs/protocol.md 12.2): concurrent heartbeat starts of one key, each sent
// to another worker than the one that drew its session, never take more seats than max_sessions,
// with `reject` and with `kick_oldest`; then the same through `keywarden serve` with WORKERS=3 on
// one port, where the kernel spreads the connections over the workers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { startCluster, type Cluster } from '../helpers/cluster.js';
import { Api } from '../helpers/http.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/process.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'seats-system-0001';
const HASH = 'feedface'.repeat(4);
const MAX = 2;
const STARTS = 12;

let ipSeq = 0;
function client(base: string): ClientApi {
  const c = new ClientApi(base);
  c.extraHeaders.connection = 'close';
  // Rate limits are per IP and shared through Redis: one IP per client.
  c.extraHeaders['x-forwarded-for'] = `198.19.${(++ipSeq >> 8) & 255}.${ipSeq & 255}`;
  return c;
}

interface Activated {
  session: string;
}

/** `n` client sessions of `key`, each drawn on (and activated through) worker i mod bases. */
async function activate(bases: string[], apiKey: string, key: string, n: number): Promise<Activated[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const c = client(bases[i % bases.length]!);
      const session = (await c.post('/api/client/init', { api_key: apiKey })).body.session as string;
      const r = await c.post('/api/client/license', { session, license: key, hwid: hwid(`seat${i}`) });
      expect(r.status).toBe(200);
      return { session };
    }),
  );
}

/** Starts every session at once, each through the next worker after the one that drew it. */
function startAll(bases: string[], sessions: Activated[]) {
  return Promise.all(
    sessions.map((s, i) =>
      client(bases[(i + 1) % bases.length]!).post('/api/client/heartbeat/start', {
        session: s.session,
        system_id: SYS,
      }),
    ),
  );
}

/** How many of the started sessions are alive: a first beat each, through yet another worker. */
async function acceptedBeats(bases: string[], started: { session: string; token: string }[]): Promise<number> {
  const r = await Promise.all(
    started.map((s, i) =>
      client(bases[(i + 2) % bases.length]!).post('/api/client/heartbeat', {
        session: s.session,
        token: s.token,
        system_id: SYS,
        beat_index: 1,
        code_hash: HASH,
      }),
    ),
  );
  return r.filter((x) => x.status === 200).length;
}

async function liveSessions(owner: Api, appId: string, keyPreviewOf: string): Promise<number> {
  const items = (await owner.get(`/api/apps/${appId}/licenses?limit=100`)).body.items as {
    key_preview: string;
    live_sessions: number;
  }[];
  const preview = `${keyPreviewOf.slice(0, 4)}****${keyPreviewOf.slice(-4)}`;
  return items.find((k) => k.key_preview === preview)!.live_sessions;
}

describe.skipIf(!hasRedis)('seats on three worker processes', () => {
  let cluster: Cluster;
  let bases: string[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ workers: 3, name: 'Seats', keys: 2 });
    bases = cluster.workers.map((w) => w.base);
  }, 60_000);

  afterAll(async () => {
    await Promise.all((cluster?.workers ?? []).map((w) => w.stop('SIGTERM')));
    await cluster?.close();
  });

  it('reject: concurrent starts on one key through different workers take exactly max_sessions seats', async () => {
    const { owner, app } = cluster;
    expect((await owner.patch(`/apps/${app.id}`, { max_sessions: MAX })).status).toBe(200);
    const key = cluster.keys[0]!;
    const sessions = await activate(bases, app.api_key, key, STARTS);
    for (let round = 0; round < 3; round++) {
      const answers = await startAll(bases, sessions);
      const ok = answers.filter((a) => a.status === 200);
      expect(ok.length).toBe(MAX);
      expect(answers.filter((a) => a.status !== 200).map((a) => [a.status, a.body])).toEqual(
        Array.from({ length: STARTS - MAX }, () => [409, { detail: 'Concurrent session limit reached' }]),
      );
      expect(await liveSessions(owner, app.id, key)).toBe(MAX);
      // Free every seat (stop through a worker that neither drew nor started the session) for the next round.
      const started = sessions.map((s, i) => ({ ...s, answer: answers[i]!, i })).filter((s) => s.answer.status === 200);
      for (const s of started) {
        const stop = await client(bases[(s.i + 2) % bases.length]!).post('/api/client/heartbeat/stop', {
          session: s.session,
          token: s.answer.body.token,
        });
        expect(stop.status).toBe(200);
      }
    }
  }, 120_000);

  it('kick_oldest: concurrent starts end older sessions so that never more than max_sessions stay alive', async () => {
    const { owner, app } = cluster;
    expect((await owner.patch(`/apps/${app.id}`, { max_sessions: MAX, session_overflow: 'kick_oldest' })).status).toBe(
      200,
    );
    const key = cluster.keys[1]!;
    const sessions = await activate(bases, app.api_key, key, STARTS);
    const answers = await startAll(bases, sessions);
    // A start whose seat went to a concurrent one kicks it, so every start answers 200 (or, when every
    // seat was claimed by starts still under way, 409).
    const started = sessions
      .map((s, i) => ({ session: s.session, answer: answers[i]! }))
      .filter((s) => s.answer.status === 200)
      .map((s) => ({ session: s.session, token: s.answer.body.token as string }));
    expect(started.length).toBeGreaterThanOrEqual(MAX);
    expect(await acceptedBeats(bases, started)).toBe(MAX);
    expect(await liveSessions(owner, app.id, key)).toBe(MAX);
    const kills = (await owner.get(`/api/apps/${app.id}/logs?action=heartbeat.kill&limit=100`)).body as {
      detail: string;
    }[];
    expect(kills.length).toBe(started.length - MAX);
    expect(new Set(kills.map((k) => k.detail))).toEqual(new Set(['Session killed: session limit']));
  }, 120_000);
});

describe.skipIf(!hasRedis)('seats under keywarden serve with WORKERS=3', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-seats-'));
  let primary: ServerProcess | undefined;
  let drop: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await primary?.stop('SIGTERM');
    await drop?.();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('concurrent starts on one key never take more than max_sessions seats', async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    const port = await freePort();
    primary = await spawnServer({
      WORKERS: '3',
      PORT: String(port),
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kwseats${Date.now()}:`,
      DATA_DIR: dataDir,
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
      TRUSTED_PROXIES: '127.0.0.1',
    });
    const base = `http://127.0.0.1:${port}`;
    const owner = await new Api(base).signIn(OWNER.username, OWNER.password);
    const app = (await owner.post('/apps', { name: 'Seats' })).body as { id: string; api_key: string };
    expect((await owner.patch(`/apps/${app.id}`, { max_sessions: MAX })).status).toBe(200);
    const [key] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body.map(
      (k: { key: string }) => k.key,
    );
    const sessions = await activate([base], app.api_key, key, STARTS);
    const answers = await startAll([base], sessions);
    expect(answers.filter((a) => a.status === 200).length).toBe(MAX);
    expect(answers.filter((a) => a.status === 409).length).toBe(STARTS - MAX);
    expect(await liveSessions(owner, app.id, key)).toBe(MAX);
  }, 120_000);
});
