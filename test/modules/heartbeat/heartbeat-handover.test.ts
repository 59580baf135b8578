// A heartbeat session restored on another worker (handover or failover) keeps everything that
// judges it: after the owner leaves, the survivor loads the session through the versioned codec
// and a beat with another code_hash is a tamper kill there too (a restore that dropped code_hash
// once passed the cluster tests silently).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { ClientApi, hwid } from '../../helpers/client.js';
import { createTestDatabase, startTestServer, type TestServer } from '../../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { shardOf } from '../../../src/platform/cluster/cluster-node.js';

const hasRedis = await redisAvailable();
const SYS = 'handover-system-01';
const HASH = 'abad1dea'.repeat(4);

describe.skipIf(!hasRedis)('heartbeat sessions moving between workers', () => {
  let workers: TestServer[] = [];
  let drop: () => Promise<void>;
  let f: AppFixture;

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    // Hosts of one deployment share the keys (a host with others refuses to start).
    const env = {
      REDIS_URL,
      REDIS_PREFIX: `kwh${randomBytes(4).toString('hex')}:`,
      RESPONSE_SIGNING_KEY: randomBytes(32).toString('base64'),
      LICENSE_HASH_KEY: randomBytes(32).toString('base64'),
      TWO_FACTOR_KEY: randomBytes(32).toString('base64'),
    };
    workers = [
      await startTestServer(env, { databaseUrl: db.url }),
      await startTestServer(env, { databaseUrl: db.url }),
    ];
    // Both are members and the 1024 shards are split between them.
    for (let i = 0; i < 20 && workers.some((w) => w.server.app.domain.node.memberCount < 2); i++) {
      await Promise.all(workers.map((w) => w.server.app.domain.node.tick()));
    }
    await Promise.all(workers.map((w) => w.server.app.domain.node.tick()));
    f = await appFixture(workers[0]!, { heartbeat_interval: 30 });
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) await w.server.shutdown('test').catch(() => undefined);
    await drop?.();
  });

  it('the survivor restores the session with its code_hash baseline: a changed hash is killed', async () => {
    const [key] = await f.keys(1);
    const c = new ClientApi(workers[0]!.base);
    const session = (await c.post('/api/client/init', { api_key: f.app.api_key })).body.session as string;
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(3) })).status).toBe(200);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    const first = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
      code_size: 4096,
    });
    expect(first.status).toBe(200);

    const shard = shardOf(session);
    const ownerIndex = workers.findIndex((w) => w.server.app.domain.node.fenceOf(shard) !== undefined);
    expect(ownerIndex).toBeGreaterThanOrEqual(0);
    const survivor = workers[1 - ownerIndex]!;
    await workers[ownerIndex]!.server.shutdown('test'); // graceful: state is durable, leases released
    workers = [survivor];

    const s = new ClientApi(survivor.base);
    const tampered = await s.post('/api/client/heartbeat', {
      session,
      token: first.body.new_token,
      system_id: SYS,
      beat_index: 2,
      code_hash: 'deadbeef'.repeat(4),
      code_size: 4096,
    });
    expect(tampered.status).toBe(403);
    expect(tampered.body).toEqual({ detail: 'rejected' });
    const again = await s.post('/api/client/heartbeat', {
      session,
      token: first.body.new_token,
      system_id: SYS,
      beat_index: 3,
      code_hash: HASH,
      code_size: 4096,
    });
    expect(again.status).toBe(403); // the session is gone: it was killed, not merely refused
    expect(survivor.server.app.domain.node.fenceOf(shard)).toBeDefined();
  }, 60_000);
});
