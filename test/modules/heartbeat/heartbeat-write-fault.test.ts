// A beat whose outcome could not be made durable did not happen. Redis goes away just as the owner
// writes an accepted beat's new state (a proxy cuts the connection when the fenced write arrives,
// after the session was read): the client gets a signed 503, and the very same beat, sent again
// once Redis answers, is accepted as the next one. Before, the actor had already moved to the new
// token in memory, so the retry was refused as a wrong token and the session's chain was broken.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { tcpForward } from '../../helpers/netns.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { leaseName, shardOf } from '../../../src/platform/cluster/shard-leases.js';
import { decodeHeartbeat } from '../../../src/modules/heartbeat/heartbeat-codec.js';

const hasRedis = await redisAvailable();
const SYS = 'write-fault-system';
const HASH = 'f0a17000'.repeat(4);

describe.skipIf(!hasRedis)('a heartbeat write that fails', () => {
  let t: TestServer;
  let f: AppFixture;
  let proxy: Awaited<ReturnType<typeof tcpForward>>;
  /** While set, a connection that sends the fenced write of a heartbeat state (EVALSHA, or EVAL on a new connection) is cut. */
  let failWrites = false;
  /** While set, such a write reaches Redis and is applied, and the connection is cut as its answer comes back. */
  let loseAnswers = false;
  const prefix = `kwwf${randomBytes(3).toString('hex')}:`;

  beforeAll(async () => {
    const u = new URL(REDIS_URL);
    proxy = await tcpForward('127.0.0.1', { host: u.hostname, port: Number(u.port || 6379) }, (chunk) => {
      if (!(failWrites || loseAnswers)) return false;
      if (!/\r\neval(sha)?\r\n/i.test(chunk.toString('latin1')) || !chunk.includes('hbs:')) return false;
      return failWrites ? true : 'after-reply';
    });
    t = await startTestServer({ REDIS_URL: `redis://127.0.0.1:${proxy.port}`, REDIS_PREFIX: prefix });
    f = await appFixture(t, { heartbeat_interval: 30 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
  });

  async function live() {
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    const beat = (token: string, index: number) =>
      c.post('/api/client/heartbeat', { session, token, system_id: SYS, beat_index: index, code_hash: HASH });
    const first = await beat(start.body.token, 1);
    expect(first.status).toBe(200);
    return { session, beat, first };
  }

  it('answers 503 and leaves the session as it was: the same beat is accepted afterwards', async () => {
    const { beat, first } = await live();

    failWrites = true;
    const lost = await beat(first.body.new_token, 2);
    failWrites = false;
    expect(lost.status, JSON.stringify(lost.body)).toBe(503);
    expect(lost.headers.get('x-response-signature')).toBeTruthy();

    const again = await beat(first.body.new_token, 2);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.beat_count).toBe(2);
    const next = await beat(again.body.new_token, 3);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.beat_count).toBe(3);
  }, 60_000);

  it('a write applied whose answer was lost: the owner writes its own state again, so the next owner agrees', async () => {
    const { session, beat, first } = await live();
    const redis = new Redis(REDIS_URL);
    const shard = shardOf(session);
    const stored = async () => {
      const raw = await redis.hgetBuffer(`${prefix}hbs:${shard}`, session);
      return raw ? decodeHeartbeat(raw).beatCount : undefined;
    };
    try {
      expect(await stored()).toBe(1);
      // Beat 2 is written (and written again by the Redis client after each lost connection), but
      // no answer comes back: the client gets 503 and the owner keeps beat 1.
      loseAnswers = true;
      const lost = await beat(first.body.new_token, 2);
      loseAnswers = false;
      expect(lost.status, JSON.stringify(lost.body)).toBe(503);
      // The owner writes beat 1 again: what Redis holds agrees with the client once more.
      await expect.poll(stored, { timeout: 10_000 }).toBe(1);
      // A Redis restart past the lease's time-to-live: the shard is loaded afresh from what Redis holds.
      expect(await redis.del(`${prefix}lease:${leaseName(shard)}`)).toBe(1);
    } finally {
      loseAnswers = false;
      redis.disconnect();
    }
    const again = await beat(first.body.new_token, 2);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.beat_count).toBe(2);
  }, 60_000);

  it('a lease gone from Redis (expired while it was away): the beat is routed afresh and accepted once', async () => {
    const { session, beat, first } = await live();
    const redis = new Redis(REDIS_URL);
    try {
      // What a Redis restart after the lease's time-to-live leaves: the shard is nobody's.
      expect(await redis.del(`${prefix}lease:${leaseName(shardOf(session))}`)).toBe(1);
    } finally {
      redis.disconnect();
    }
    // The owner's write under its old fence is refused; it stops serving the shard, takes it again
    // under a new fence, loads the session as last written, and the beat is accepted there.
    const r = await beat(first.body.new_token, 2);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.beat_count).toBe(2);
    const next = await beat(r.body.new_token, 3);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
  }, 60_000);
});
