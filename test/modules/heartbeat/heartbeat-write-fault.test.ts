// A beat whose outcome could not be made durable did not happen. Redis goes away just as the owner
// writes an accepted beat's new state (a proxy cuts the connection when the fenced write arrives,
// after the session was read): the client gets a signed 503, and the very same beat, sent again
// once Redis answers, is accepted as the next one. Before, the actor had already moved to the new
// token in memory, so the retry was refused as a wrong token and the session's chain was broken.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { tcpForward } from '../../helpers/netns.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'write-fault-system';
const HASH = 'f0a17000'.repeat(4);

describe.skipIf(!hasRedis)('a heartbeat write that fails', () => {
  let t: TestServer;
  let f: AppFixture;
  let proxy: Awaited<ReturnType<typeof tcpForward>>;
  /** While set, a connection that sends the fenced write of a heartbeat state (EVALSHA, or EVAL on a new connection) is cut. */
  let failWrites = false;

  beforeAll(async () => {
    const u = new URL(REDIS_URL);
    proxy = await tcpForward(
      '127.0.0.1',
      { host: u.hostname, port: Number(u.port || 6379) },
      (chunk) => failWrites && /\r\neval(sha)?\r\n/i.test(chunk.toString('latin1')) && chunk.includes('hbs:'),
    );
    t = await startTestServer({
      REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
      REDIS_PREFIX: `kwwf${randomBytes(3).toString('hex')}:`,
    });
    f = await appFixture(t, { heartbeat_interval: 30 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
  });

  it('answers 503 and leaves the session as it was: the same beat is accepted afterwards', async () => {
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
});
