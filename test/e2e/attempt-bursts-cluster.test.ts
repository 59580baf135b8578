// Attempt limits under concurrency across workers (docs/protocol.md 11.31): two worker processes sharing
// Redis, each burst spread over both, so an attempt reserved on one worker counts on the other
// before either checks a password: at most the limit is answered 401, the rest 429.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../helpers/cluster.js';
import { OWNER } from '../helpers/server.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { nextIp } from '../helpers/fixture.js';
import { clientLoginBurst, dashboardBurst, expectLimited, freshIp } from '../helpers/bursts.js';
import { redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const BURST = 60;

describe.skipIf(!hasRedis)('attempt limits across two workers', () => {
  let cl: Cluster;
  let bases: string[];
  beforeAll(async () => {
    cl = await startCluster({ workers: 2, name: 'Bursts', keys: 2 });
    bases = cl.workers.map((w) => w.base);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(cl.workers.map((w) => w.stop()));
    await cl.close();
  });

  it('dashboard: 60 parallel wrong passwords for one name over both workers: at most 5 are 401', async () => {
    // The owner's own name: the burst locks it, which nothing after this test needs.
    const statuses = await dashboardBurst(
      bases,
      BURST,
      () => ({ username: OWNER.username, password: 'wrong' }),
      freshIp,
    );
    expectLimited(statuses, 401, 5);
  });

  it('client: 60 parallel wrong logins for one user over both workers: at most 10 are 401', async () => {
    const c = new ClientApi(bases[0]!);
    c.extraHeaders['x-forwarded-for'] = nextIp();
    const session = (await c.post('/api/client/init', { api_key: cl.app.api_key })).body.session as string;
    const r = await c.post('/api/client/register', {
      session,
      username: 'cluster-user',
      password: 'right-pass-1',
      license: cl.keys[0],
      hwid: hwid(7),
    });
    expect(r.status).toBe(200);
    const statuses = await clientLoginBurst(bases, cl.app.api_key, BURST, () => 'cluster-user', freshIp);
    expectLimited(statuses, 401, 10);
  });
});
