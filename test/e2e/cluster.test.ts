// Three real worker processes sharing PostgreSQL and Redis: forwarded requests, a SIGKILLed
// worker's sessions continuing on the survivors with their latest tokens (no re-authentication,
// no replay accepted), and shard handover on SIGTERM without a failed beat.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'cluster-system-01';
const HASH = 'feedface'.repeat(4);

interface Live {
  session: string;
  token: string;
  index: number;
  previous?: { token: string; index: number };
}

describe.skipIf(!hasRedis)('cluster of three workers', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-cluster-'));
  let workers: ServerProcess[] = [];
  let drop: () => Promise<void>;
  let env: Record<string, string>;
  let apiKey = '';
  let keys: string[] = [];

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    env = {
      DATABASE_URL: db.url, REDIS_URL, REDIS_PREFIX: `kwc${Date.now()}:`, DATA_DIR: dataDir,
      OWNER_USERNAME: OWNER.username, OWNER_PASSWORD: OWNER.password, TRUSTED_PROXIES: '127.0.0.1',
    };
    workers = await Promise.all([spawnServer(env), spawnServer(env), spawnServer(env)]);
    const owner = await new Api(workers[0]!.base).signIn(OWNER.username, OWNER.password);
    const app = (await owner.post('/apps', { name: 'Cluster' })).body;
    await owner.patch(`/apps/${app.id}`, { heartbeat_interval: 5 });
    apiKey = app.api_key;
    keys = (await owner.post(`/apps/${app.id}/licenses`, { amount: 60, duration: 1 })).body.map((k: { key: string }) => k.key);
    // Every worker sees all three and the shards are spread before the test starts.
    await waitFor(async () => (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_members')))).every((n) => n === 3));
    await waitFor(async () => (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_owned_shards')))).reduce((a, b) => a + b, 0) === 1024);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function metric(w: ServerProcess, name: string): Promise<number> {
    const text = await (await fetch(`${w.base}/metrics`)).text();
    const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  }

  async function waitFor(cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await cond())) {
      if (Date.now() > end) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  let ipSeq = 0;
  function client(w: ServerProcess): ClientApi {
    const c = new ClientApi(w.base);
    c.extraHeaders.connection = 'close'; // no keep-alive: a stopping worker never holds our next request
    // Rate limits are per IP and shared by every worker through Redis: one IP per client here.
    c.extraHeaders['x-forwarded-for'] = `198.19.${(++ipSeq >> 8) & 255}.${ipSeq & 255}`;
    return c;
  }

  async function startSessions(n: number, via: ServerProcess[]): Promise<Live[]> {
    const out: Live[] = [];
    for (let i = 0; i < n; i++) {
      const c = client(via[i % via.length]!);
      const session = (await c.post('/api/client/init', { api_key: apiKey })).body.session;
      expect((await c.post('/api/client/license', { session, license: keys.pop(), hwid: hwid(`c${i}`) })).status).toBe(200);
      const start = await client(via[(i + 1) % via.length]!).post('/api/client/heartbeat/start', { session, system_id: SYS });
      expect(start.status).toBe(200);
      out.push({ session, token: start.body.token, index: 0 });
    }
    return out;
  }

  /** One beat for every session through the given workers; returns the statuses. */
  async function beatAll(sessions: Live[], via: ServerProcess[]): Promise<number[]> {
    return Promise.all(sessions.map(async (s, i) => {
      const index = s.index + 1;
      const r = await client(via[(i + index) % via.length]!).post('/api/client/heartbeat', {
        session: s.session, token: s.token, system_id: SYS, beat_index: index, code_hash: HASH,
      });
      if (r.status === 200) {
        expect(r.body.proof).toBe(createHmac('sha256', s.token).update(`kwhb1\n${s.session}\n${index}\n${r.body.new_token}\n${r.body.beat_count}`).digest('base64'));
        s.previous = { token: s.token, index: s.index };
        s.token = r.body.new_token;
        s.index = index;
      }
      return r.status;
    }));
  }

  it('answers forwarded requests on any worker', async () => {
    const sessions = await startSessions(9, workers);
    const before = (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce((a, b) => a + b, 0);
    for (let round = 0; round < 3; round++) expect(await beatAll(sessions, workers)).toEqual(sessions.map(() => 200));
    const after = (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce((a, b) => a + b, 0);
    expect(after - before).toBeGreaterThan(5); // with three workers about two thirds of the 27 beats are forwarded
  });

  it("a SIGKILLed worker's sessions continue on the survivors with their latest tokens; no replay is accepted", async () => {
    const sessions = await startSessions(12, workers);
    expect(await beatAll(sessions, workers)).toEqual(sessions.map(() => 200));
    const victim = workers[2]!;
    const survivors = workers.slice(0, 2);
    victim.child.kill('SIGKILL');
    await victim.exited;
    // Beats wait (bounded) while the dead worker's leases expire and the survivors take over.
    for (let round = 0; round < 2; round++) expect(await beatAll(sessions, survivors)).toEqual(sessions.map(() => 200));
    // Replays of the last accepted beat (its token and index) are refused everywhere.
    for (const s of sessions) {
      const r = await client(survivors[0]!).post('/api/client/heartbeat', { session: s.session, token: s.previous!.token, system_id: SYS, beat_index: s.index, code_hash: HASH });
      expect(r.body).toEqual({ detail: 'rejected' });
    }
    expect(await beatAll(sessions, survivors)).toEqual(sessions.map(() => 200));
    workers = survivors;
    workers.push(await spawnServer(env)); // back to three for the next test
    await waitFor(async () => (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_members')))).every((n) => n === 3));
  }, 60_000);

  it('hands shards over on SIGTERM without a failed beat', async () => {
    const sessions = await startSessions(12, workers);
    const leaving = workers[1]!;
    const staying = [workers[0]!, workers[2]!];
    await waitFor(async () => (await metric(leaving, 'keywarden_cluster_owned_shards')) > 0);
    const beats = (async () => {
      const statuses: number[] = [];
      for (let round = 0; round < 6; round++) statuses.push(...(await beatAll(sessions, staying)));
      return statuses;
    })();
    leaving.child.kill('SIGTERM');
    expect(await leaving.exited).toBe(0);
    expect(new Set(await beats)).toEqual(new Set([200]));
    workers = staying;
  }, 60_000);
});
