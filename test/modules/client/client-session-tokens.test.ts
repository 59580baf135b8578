// An unactivated session is a sealed token and init stores nothing for it; sessions with
// an enc_key keep their response key under CLIENT_SESSION_LIMIT, past which init answers a signed
// 503 with Retry-After and recovers; activation stores the record, and a killed heartbeat's
// deactivation still holds. With two workers in cluster mode, a client that stays on one worker
// is served there: its session's shard is one that worker owns.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { ClientApi, decryptEnc, hwid } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { shardOf } from '../../../src/platform/cluster/cluster-node.js';

const hasRedis = await redisAvailable();
const SYS = 'token-system-01';
const HASH = 'feedbeef'.repeat(4);

describe('one worker', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  });
  afterAll(() => t.close());

  it('init stores nothing for a session without enc_key; the first activation stores its record', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await t.server.services.coordinator.get(`sess:${session}`)).toBeNull();
    expect(t.server.app.domain.client.sessions.keys.size).toBe(0);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    expect(await t.server.services.coordinator.get(`sess:${session}`)).not.toBeNull();
  });

  it('a session opened with enc_key encrypts later calls with the key of its init, also after rotate-secret', async () => {
    const f = await appFixture(t);
    const [k1, k2] = await f.keys(2);
    const c = f.client();
    const encKey = 'enc-' + randomBytes(8).toString('hex');
    const session = await f.session(c, { enc_key: encKey });
    expect(await t.server.services.coordinator.get(`sess:${session}`)).toBeNull();
    const r = await c.post('/api/client/license', { session, license: k1, hwid: hwid(1), init_iv: 'iv-1' });
    expect(r.status).toBe(200);
    expect(decryptEnc(r.body.enc, encKey, f.app.api_secret, 'iv-1')).toMatchObject({
      success: true,
      message: 'License activated',
    });
    // The client opened its session with this api_secret and keeps using it until it opens another.
    const rotated = await f.owner.post(`/apps/${f.app.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const again = await c.post('/api/client/license', { session, license: k2, hwid: hwid(2), init_iv: 'iv-2' });
    expect(again.status).toBe(200);
    expect(decryptEnc(again.body.enc, encKey, f.app.api_secret, 'iv-2')).toMatchObject({ success: true });
    // A new session after the rotation uses the new secret.
    const fresh = await f.session(c, { enc_key: encKey });
    const [k3] = await f.keys(1);
    const third = await c.post('/api/client/license', { session: fresh, license: k3, hwid: hwid(3), init_iv: 'iv-3' });
    expect(decryptEnc(third.body.enc, encKey, rotated.body.api_secret, 'iv-3')).toMatchObject({ success: true });
  });

  it('a tampered token is the same 401 as an unknown one', async () => {
    const f = await appFixture(t);
    const c = f.client();
    const session = await f.session(c);
    const bytes = Buffer.from(session, 'base64url');
    bytes[20]! ^= 0x01;
    for (const s of [bytes.toString('base64url'), session.slice(0, 42) + (session[42] === 'A' ? 'Q' : 'A')]) {
      const r = await c.post('/api/client/license', { session: s, license: 'x', hwid: hwid() });
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ detail: 'Invalid or expired session' });
    }
  });

  it('a killed heartbeat deactivates the session; a new activation works again', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(5) })).status).toBe(200);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    const killed = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: 'another-system-9',
      beat_index: 1,
      code_hash: HASH,
    });
    expect(killed.body).toEqual({ detail: 'rejected' });
    const restart = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(restart.status).toBe(403);
    expect(restart.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(5) })).status).toBe(200);
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: SYS })).status).toBe(200);
  });
});

describe('CLIENT_SESSION_LIMIT', () => {
  let t: TestServer;
  const clock = new TestClock();
  beforeAll(async () => {
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', CLIENT_SESSION_LIMIT: '2' }, { clock });
  });
  afterAll(() => t.close());

  it('past the bound init with enc_key answers a signed 503 with Retry-After; without enc_key it still opens; it recovers', async () => {
    const f = await appFixture(t);
    const c = f.client();
    const first = await f.session(c, { enc_key: 'k1' });
    await f.session(c, { enc_key: 'k2' });
    const full = await c.post('/api/client/init', { api_key: f.app.api_key, enc_key: 'k3', init_iv: 'iv' }); // signature verified by ClientApi
    expect(full.status).toBe(503);
    expect(full.body).toEqual({ detail: 'Service unavailable' });
    const wait = Number(full.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(300);
    expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=client.init`)).body as { detail: string }[];
    expect(logs.some((l) => l.detail.startsWith('503'))).toBe(true);

    // 24 hours on, the first two have expired and there is room again. The response is dated by the
    // server's (moved) clock, so it is read without ClientApi's freshness check.
    clock.advance(24 * 3600 * 1000);
    const res = await fetch(`${t.base}/api/client/init`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.18.250.1' },
      body: JSON.stringify({ api_key: f.app.api_key, enc_key: 'k4' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-response-signature')).toBeTruthy();
    const old = await fetch(`${t.base}/api/client/heartbeat/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session: first, system_id: SYS }),
    });
    expect(old.status).toBe(401);
    clock.advance(-24 * 3600 * 1000);
  });
});

describe.skipIf(!hasRedis)('two workers in cluster mode', () => {
  let workers: TestServer[] = [];
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    // Workers of one deployment share their secrets (one DATA_DIR, or these options): the signing
    // seed, and with it the session-token key, the license-hash key and the two-factor key.
    const env = {
      REDIS_URL,
      REDIS_PREFIX: `kwst${randomBytes(4).toString('hex')}:`,
      TRUSTED_PROXIES: '127.0.0.1',
      RESPONSE_SIGNING_KEY: randomBytes(32).toString('base64'),
      LICENSE_HASH_KEY: randomBytes(32).toString('base64'),
      TWO_FACTOR_KEY: randomBytes(32).toString('base64'),
    };
    workers = [
      await startTestServer(env, { databaseUrl: db.url }),
      await startTestServer(env, { databaseUrl: db.url }),
    ];
    // Until the split has settled: both members, every shard held, the same counts after another round
    // (right after start the first worker holds every shard and hands half over).
    const counts = () => workers.map((w) => w.server.app.domain.node.ownedShards);
    let last = '';
    for (let i = 0; i < 100; i++) {
      await Promise.all(workers.map((w) => w.server.app.domain.node.tick()));
      const owned = counts();
      const settled =
        workers.every((w) => w.server.app.domain.node.memberCount === 2) &&
        owned.every((n) => n > 0) &&
        owned[0]! + owned[1]! === 1024;
      if (settled && owned.join('/') === last) break;
      last = settled ? owned.join('/') : '';
    }
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) await w.server.shutdown('test').catch(() => undefined);
    await drop?.();
  });

  async function metric(w: TestServer, name: string): Promise<number> {
    const text = await (await fetch(`${w.base}/metrics`)).text();
    return Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)![1]);
  }

  it('sessions opened on a worker land on shards it owns, and work on the other worker too', async () => {
    const [a, b] = workers as [TestServer, TestServer];
    const owned = (w: TestServer, s: string) => w.server.app.domain.node.fenceOf(shardOf(s)) !== undefined;
    expect(a.server.app.domain.node.ownedShards).toBeGreaterThan(0);
    expect(b.server.app.domain.node.ownedShards).toBeGreaterThan(0);
    const f = await appFixture(a);
    const ca = new ClientApi(a.base);
    const cb = new ClientApi(b.base);
    for (let i = 0; i < 40; i++) {
      ca.extraHeaders['x-forwarded-for'] = `198.18.200.${i}`;
      cb.extraHeaders['x-forwarded-for'] = `198.18.201.${i}`;
      expect(owned(a, await f.session(ca))).toBe(true);
      expect(owned(b, await f.session(cb))).toBe(true);
    }
    // A token of worker A is a session on worker B too (one deployment, one key).
    const [key] = await f.keys(1);
    const s = await f.session(ca);
    expect((await cb.post('/api/client/license', { session: s, license: key, hwid: hwid(7) })).status).toBe(200);
  });

  it('a client staying on one worker has init, license, heartbeat start and beats served there: nothing forwarded', async () => {
    const [a] = workers as [TestServer, TestServer];
    const f = await appFixture(a, { heartbeat_interval: 30 });
    // License ops route by the key's id, not the session: use a key whose actor lives on worker A
    // too (each of the 16 is on A with probability 1/2).
    const keys = await f.keys(16);
    const c = new ClientApi(a.base);
    c.extraHeaders['x-forwarded-for'] = '198.18.202.1';
    const session = await f.session(c);
    let licensed = false;
    for (const key of keys) {
      // Activating a key on another worker's shard would be forwarded: find one of ours by trying.
      const before = await metric(a, 'keywarden_cluster_forwarded_total');
      const r = await c.post('/api/client/license', { session, license: key, hwid: hwid(9) });
      expect(r.status).toBe(200);
      if ((await metric(a, 'keywarden_cluster_forwarded_total')) === before) {
        licensed = true;
        break;
      }
    }
    expect(licensed).toBe(true);
    const forwarded = await metric(a, 'keywarden_cluster_forwarded_total');
    const local = await metric(a, 'keywarden_cluster_local_total');
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    let token = start.body.token as string;
    for (let i = 1; i <= 5; i++) {
      const r = await c.post('/api/client/heartbeat', {
        session,
        token,
        system_id: SYS,
        beat_index: i,
        code_hash: HASH,
      });
      expect(r.status).toBe(200);
      token = r.body.new_token;
    }
    expect(await metric(a, 'keywarden_cluster_forwarded_total')).toBe(forwarded);
    expect(await metric(a, 'keywarden_cluster_local_total')).toBeGreaterThanOrEqual(local + 6);
  }, 60_000);
});
