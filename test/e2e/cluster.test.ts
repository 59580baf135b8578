// Three real worker processes sharing PostgreSQL and Redis: forwarded requests, a SIGKILLed
// worker's sessions continuing on the survivors with their latest tokens (no re-authentication,
// no replay accepted), and shard handover on SIGTERM without a failed beat.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, untilFormed, waitFor, type Cluster } from '../helpers/cluster.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';

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
  let cluster: Cluster;
  let workers: ServerProcess[] = [];
  let apiKey = '';
  let keys: string[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ workers: 3, name: 'Cluster', keys: 60 });
    ({ workers, keys } = cluster);
    apiKey = cluster.app.api_key;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await cluster?.close();
  });

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
      expect((await c.post('/api/client/license', { session, license: keys.pop(), hwid: hwid(`c${i}`) })).status).toBe(
        200,
      );
      const start = await client(via[(i + 1) % via.length]!).post('/api/client/heartbeat/start', {
        session,
        system_id: SYS,
      });
      expect(start.status).toBe(200);
      out.push({ session, token: start.body.token, index: 0 });
    }
    return out;
  }

  /** One beat for every session through the given workers; returns the statuses. */
  async function beatAll(sessions: Live[], via: ServerProcess[]): Promise<number[]> {
    return Promise.all(
      sessions.map(async (s, i) => {
        const index = s.index + 1;
        const r = await client(via[(i + index) % via.length]!).post('/api/client/heartbeat', {
          session: s.session,
          token: s.token,
          system_id: SYS,
          beat_index: index,
          code_hash: HASH,
        });
        if (r.status === 200) {
          expect(r.body.proof).toBe(
            createHmac('sha256', s.token)
              .update(`kwhb1\n${s.session}\n${index}\n${r.body.new_token}\n${r.body.beat_count}`)
              .digest('base64'),
          );
          s.previous = { token: s.token, index: s.index };
          s.token = r.body.new_token;
          s.index = index;
        }
        return r.status;
      }),
    );
  }

  it('answers forwarded requests on any worker', async () => {
    const sessions = await startSessions(9, workers);
    const before = (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce(
      (a, b) => a + b,
      0,
    );
    for (let round = 0; round < 3; round++) expect(await beatAll(sessions, workers)).toEqual(sessions.map(() => 200));
    const after = (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce(
      (a, b) => a + b,
      0,
    );
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
      const r = await client(survivors[0]!).post('/api/client/heartbeat', {
        session: s.session,
        token: s.previous!.token,
        system_id: SYS,
        beat_index: s.index,
        code_hash: HASH,
      });
      expect(r.body).toEqual({ detail: 'rejected' });
    }
    expect(await beatAll(sessions, survivors)).toEqual(sessions.map(() => 200));
    workers = survivors;
    workers.push(await spawnServer(cluster.env)); // back to three for the next test
    await untilFormed(workers);
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
