// Two real worker processes sharing PostgreSQL and Redis: each counts the heartbeats it accepts
// (beats alternate between the workers, whichever owns the session) and adds its counts to
// beat_counts when it shuts down, so the table holds the sum of both.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { startCluster, type Cluster } from '../helpers/cluster.js';
import type { ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'beats-cluster-01';
const HASH = 'c0ffee00'.repeat(4);

describe.skipIf(!hasRedis)('beat counts on a cluster of two workers', () => {
  let cluster: Cluster;
  let workers: ServerProcess[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ workers: 2, name: 'Beats', keys: 4 });
    workers = cluster.workers;
  }, 60_000);
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await cluster?.close();
  });

  let ipSeq = 0;
  function client(w: ServerProcess): ClientApi {
    const c = new ClientApi(w.base);
    c.extraHeaders.connection = 'close';
    c.extraHeaders['x-forwarded-for'] = `198.19.200.${++ipSeq}`;
    return c;
  }

  it('adds what every worker accepted, flushed at its graceful shutdown', async () => {
    const sessions: { session: string; token: string }[] = [];
    for (let i = 0; i < 4; i++) {
      const c = client(workers[i % 2]!);
      const session = (await c.post('/api/client/init', { api_key: cluster.app.api_key })).body.session;
      const lic = await c.post('/api/client/license', { session, license: cluster.keys[i], hwid: hwid(`b${i}`) });
      expect(lic.status).toBe(200);
      const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
      expect(start.status).toBe(200);
      sessions.push({ session, token: start.body.token });
    }
    for (let round = 1; round <= 3; round++) {
      for (const [i, s] of sessions.entries()) {
        // Alternate the worker that takes the beat: half of them are forwarded to the session's owner.
        const r = await client(workers[(i + round) % 2]!).post('/api/client/heartbeat', {
          session: s.session,
          token: s.token,
          system_id: SYS,
          beat_index: round,
          code_hash: HASH,
        });
        expect(r.status).toBe(200);
        s.token = r.body.new_token;
      }
    }
    expect(await Promise.all(workers.map((w) => w.stop('SIGTERM')))).toEqual([0, 0]);
    const db = new pg.Client({ connectionString: cluster.env.DATABASE_URL });
    await db.connect();
    try {
      const { rows } = await db.query(`select coalesce(sum(beats), 0)::int as n from beat_counts where app_id = $1`, [
        cluster.app.id,
      ]);
      expect(rows[0].n).toBe(12);
    } finally {
      await db.end();
    }
  }, 60_000);
});
