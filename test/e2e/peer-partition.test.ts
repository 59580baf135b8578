// Two real worker processes whose direct link stops carrying frames while the connection stays
// open (FAULT_PEER_FREEZE: SIGUSR2 makes a worker stop reading the connections its peers opened,
// what a partition between hosts does to them). Every beat forwarded across the frozen link is
// still answered 200 (the link is declared down within CLUSTER_PEER_TIMEOUT_MS plus a ping and the
// call goes through Redis pub/sub); the frames queued in the frozen socket are never applied once
// it reads again (their deadline has passed), so every session continues with its latest token.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, waitFor, type Cluster } from '../helpers/cluster.js';
import type { ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'partition-system-01';
const HASH = 'c0ffee00'.repeat(4);
/** Longer than a forwarded frame's deadline (the 12 s route deadline less a second): frames queued that long expire. */
const FREEZE_MS = 13_000;

interface Live {
  session: string;
  token: string;
  index: number;
}

describe.skipIf(!hasRedis)('a frozen link between two workers', () => {
  let cluster: Cluster;
  let workers: ServerProcess[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      workers: 2,
      name: 'Partition',
      keys: 24,
      env: { FAULT_PEER_FREEZE: '1', CLUSTER_PEER_TIMEOUT_MS: '1000' },
    });
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
    c.extraHeaders['x-forwarded-for'] = `198.18.${(++ipSeq >> 8) & 255}.${ipSeq & 255}`;
    return c;
  }

  async function beatAll(sessions: Live[], via: ServerProcess): Promise<number[]> {
    return Promise.all(
      sessions.map(async (s) => {
        const index = s.index + 1;
        const r = await client(via).post('/api/client/heartbeat', {
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
          s.token = r.body.new_token;
          s.index = index;
        }
        return r.status;
      }),
    );
  }

  it('forwarded beats fall back to pub/sub within the bound; queued frames are never applied late', async () => {
    const [a, b] = workers as [ServerProcess, ServerProcess];
    const sessions: Live[] = [];
    // Sessions are drawn on shards of the worker that answers init: these are all b's.
    for (let i = 0; i < 16; i++) {
      const c = client(b);
      const session = (await c.post('/api/client/init', { api_key: cluster.app.api_key })).body.session;
      expect(
        (await c.post('/api/client/license', { session, license: cluster.keys.pop(), hwid: hwid(`p${i}`) })).status,
      ).toBe(200);
      const start = await client(b).post('/api/client/heartbeat/start', { session, system_id: SYS });
      expect(start.status).toBe(200);
      sessions.push({ session, token: start.body.token, index: 0 });
    }
    // Beats through a are forwarded a -> b over the direct link.
    expect(await beatAll(sessions, a)).toEqual(sessions.map(() => 200));
    expect(await metric(a, 'keywarden_cluster_direct_total')).toBeGreaterThanOrEqual(16);

    b.child.kill('SIGUSR2'); // b stops reading its peers' connections
    await waitFor(async () => b.output.some((l) => l.includes('"frozen":true')));
    const frozenAt = Date.now();
    // Every beat is answered, those forwarded to b through pub/sub once the link is declared down.
    while (Date.now() - frozenAt < FREEZE_MS) {
      expect(await beatAll(sessions, a)).toEqual(sessions.map(() => 200));
      await new Promise((r) => setTimeout(r, 1_000)); // paces the rounds over the freeze
    }
    expect(await metric(a, 'keywarden_cluster_peer_link_down_total')).toBeGreaterThanOrEqual(1);
    expect(await metric(a, 'keywarden_cluster_fallback_total')).toBeGreaterThanOrEqual(1);
    expect(a.output.some((l) => l.includes('"msg":"cluster.peer_link_down"') && l.includes('ack_timeout'))).toBe(true);

    b.child.kill('SIGUSR2'); // b reads again: what queued during the freeze is past its deadline
    await waitFor(async () => (await metric(b, 'keywarden_cluster_expired_frames_total')) >= 1);
    // No late frame moved a token chain: every session beats on with the token it was last given,
    // through either worker.
    expect(await beatAll(sessions, a)).toEqual(sessions.map(() => 200));
    expect(await beatAll(sessions, b)).toEqual(sessions.map(() => 200));
    // And the link comes back.
    await waitFor(async () => {
      await beatAll(sessions, a);
      return (await metric(a, 'keywarden_cluster_peer_links_up')) === 1;
    });
  }, 90_000);
});
