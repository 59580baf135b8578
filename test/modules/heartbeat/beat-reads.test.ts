// What a beat reads from Redis (issue 26), watched with MONITOR. The realtime channel binds its session
// at the upgrade: a beat on it is served without reading the session's record again; a REST beat reads
// it once per worker and then takes the record it read, while a heartbeat start or stop still reads the
// record afresh (a new activation of the session may have changed its key). The refusal budget
// (docs/protocol.md 11.26) is read only for a session or an address this worker refused in the window.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { openLiveChannel } from '../../helpers/channel-client.js';
import { commandsOf } from '../../helpers/redis-monitor.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'binding-system';
const HASH = 'b1d0'.repeat(8);

describe.skipIf(!hasRedis)('what a beat reads from Redis', () => {
  let t: TestServer;
  let f: AppFixture;
  let client: Redis;
  let monitor: Redis;
  const prefix = `kwbind${randomBytes(3).toString('hex')}:`;

  beforeAll(async () => {
    t = await startTestServer({ REDIS_URL, REDIS_PREFIX: prefix, TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t, { heartbeat_interval: 30 });
    client = new Redis(REDIS_URL);
    await client.ping();
    monitor = await new Redis(REDIS_URL).monitor();
  }, 60_000);
  afterAll(async () => {
    monitor?.disconnect();
    client?.disconnect();
    await t?.close();
  });

  /** A client session activated with a new key, from a new address. */
  async function activated() {
    const [key] = await f.keys(1);
    const ip = nextIp();
    const c = f.client(ip);
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    return { ip, c, session };
  }

  /** The GETs of the session's record among the commands `fn` caused. */
  async function recordReads(session: string, fn: () => Promise<void>): Promise<number> {
    const seen = await commandsOf(monitor, client, prefix, fn);
    return seen.filter((a) => a[0]!.toLowerCase() === 'get' && a[1] === `${prefix}sess:${session}`).length;
  }

  it('a beat on the channel reads no session record; over REST only the first beat on a worker does', async () => {
    const { ip, c, session } = await activated();
    const ch = await openLiveChannel(t.base, session, { ip });
    let token = '';
    const startReads = await recordReads(session, async () => {
      const start = await ch.call('heartbeat/start', { system_id: SYS });
      expect(start.status).toBe(200);
      token = start.body.token;
    });
    expect(startReads).toBe(1);
    const channelReads = await recordReads(session, async () => {
      for (let i = 1; i <= 3; i++) {
        const r = await ch.call('heartbeat', { token, system_id: SYS, beat_index: i, code_hash: HASH });
        expect(r.status).toBe(200);
        token = r.body.new_token;
      }
    });
    expect(channelReads).toBe(0);
    const restBeat = async (i: number) => {
      const r = await c.post('/api/client/heartbeat', {
        session,
        token,
        system_id: SYS,
        beat_index: i,
        code_hash: HASH,
      });
      expect(r.status).toBe(200);
      token = r.body.new_token;
    };
    // A REST beat reads the record the first time on this worker, then takes the one it read.
    expect(await recordReads(session, () => restBeat(4))).toBe(1);
    expect(await recordReads(session, () => restBeat(5))).toBe(0);
    // A stop (like a start) reads it afresh: a new activation may have changed it.
    const stopReads = await recordReads(session, async () => {
      expect((await c.post('/api/client/heartbeat/stop', { session, token })).status).toBe(200);
    });
    expect(stopReads).toBe(1);
    ch.close();
  });

  it('the refusal budget is read only once this worker refused the session or its address', async () => {
    const { c, session } = await activated();
    let token = (await c.post('/api/client/heartbeat/start', { session, system_id: SYS })).body.token as string;
    let index = 0;
    const beat = (t: string, i: number) =>
      c.post('/api/client/heartbeat', { session, token: t, system_id: SYS, beat_index: i, code_hash: HASH });
    /** The commands on the budget's keys while the session's next beat is accepted. */
    const budgetReadsOfNextBeat = async () =>
      (
        await commandsOf(monitor, client, prefix, async () => {
          const r = await beat(token, ++index);
          expect(r.status).toBe(200);
          token = r.body.new_token;
        })
      ).filter((a) => a.some((x) => x.includes('hbref:'))).length;

    expect(await budgetReadsOfNextBeat()).toBe(0);
    // A refused beat (a replayed index) is counted: from then on the budget is read before each beat.
    expect((await beat(token, index)).status).toBe(403);
    expect(await budgetReadsOfNextBeat()).toBeGreaterThan(0);
  });
});
