// The realtime channel on one server: the upgrade's gate (every refusal signed per docs/protocol.md 4),
// the signed hello and keys, calls and replies, switching between REST and the channel, one channel
// per session, the server refusing forged, replayed and reordered client frames, and the limits
// (connections per IP, upgrades per minute, calls in flight, a client that does not read).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid, type ClientApi } from '../../helpers/client.js';
import { ChannelClient, openChannel, type ChannelRefusal } from '../../helpers/channel-client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);

interface Activated {
  f: AppFixture;
  c: ClientApi;
  session: string;
  ip: string;
}

async function activated(f?: AppFixture, settings: Record<string, unknown> = {}): Promise<Activated> {
  const fx = f ?? (await appFixture(t, settings));
  const [key] = await fx.keys(1);
  const ip = nextIp();
  const c = fx.client(ip);
  if (fx.app.require_signature) c.secret = fx.app.api_secret;
  const session = await fx.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
  return { f: fx, c, session, ip };
}

async function refused(p: Promise<ChannelClient | ChannelRefusal>): Promise<ChannelRefusal> {
  const r = await p;
  if (r instanceof ChannelClient) {
    r.close();
    throw new Error('the upgrade was accepted');
  }
  return r;
}

describe('upgrade', () => {
  it('answers a signed hello bound to the session and the client key; the keys work both ways', async () => {
    const a = await activated(undefined, { heartbeat_interval: 12 });
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    expect(ch.hello).toMatchObject({
      type: 'hello',
      v: 1,
      kid: 'k1',
      beat_interval: 12,
      conn: expect.stringMatching(/^[\w-]{22}$/),
    });
    expect(Math.abs(ch.hello.ts - Date.now() / 1000)).toBeLessThan(5);
    const seq = ch.send({ type: 'ping' });
    expect(await ch.next('pong')).toMatchObject({ seq: 1, re: seq });
    const logs = (await a.f.owner.get(`/api/apps/${a.f.app.id}/logs?action=client.channel`)).body;
    expect(logs.map((e: { detail: string; ip: string }) => [e.detail, e.ip])).toEqual([
      ['Realtime channel opened', a.ip],
    ]);
    ch.close();
  });

  it('refuses in the gate order, every answer signed over the X-Nonce (the client key)', async () => {
    const a = await activated();
    const unknown = await refused(ChannelClient.connect(t.base, 'Z'.repeat(43), { ip: a.ip }));
    expect(unknown).toMatchObject({ status: 401, body: { detail: 'Invalid or expired session' } });

    const fresh = await a.f.session(a.c);
    const notActivated = await refused(ChannelClient.connect(t.base, fresh, { ip: a.ip }));
    expect(notActivated).toMatchObject({
      status: 403,
      body: { detail: 'Session not activated. Call /login, /register or /license first.' },
    });

    const badKey = await refused(
      ChannelClient.connect(t.base, a.session, { ip: a.ip, headers: { 'x-nonce': 'not-a-key-0123456789' } }),
    );
    expect(badKey.status).toBe(422);
    expect(badKey.body.detail[0].loc).toEqual(['header', 'x-nonce']);
    // A low-order point would let the server be forced into a known secret: refused too.
    const zero = await refused(
      ChannelClient.connect(t.base, a.session, { ip: a.ip, headers: { 'x-nonce': 'A'.repeat(43) } }),
    );
    expect(zero.status).toBe(422);
    const version = await refused(ChannelClient.connect(t.base, a.session, { ip: a.ip, version: 'v'.repeat(65) }));
    expect(version.status).toBe(422);
    expect(version.body.detail[0].loc).toEqual(['header', 'x-client-version']);

    await a.f.owner.patch(`/apps/${a.f.app.id}`, { enabled: false, disabled_message: 'Custom text' });
    expect(await refused(ChannelClient.connect(t.base, a.session, { ip: a.ip }))).toMatchObject({
      status: 403,
      body: { detail: 'Application disabled' },
    });
    await a.f.owner.patch(`/apps/${a.f.app.id}`, { enabled: true });
    await a.f.owner.post(`/apps/${a.f.app.id}/bans`, { type: 'ip', value: a.ip });
    expect(await refused(ChannelClient.connect(t.base, a.session, { ip: a.ip }))).toMatchObject({
      status: 403,
      body: { detail: 'Access denied' },
    });

    const logs = (await a.f.owner.get(`/api/apps/${a.f.app.id}/logs?action=client.channel`)).body.map(
      (e: { detail: string }) => e.detail,
    );
    expect(logs).toEqual(
      expect.arrayContaining(['403 Access denied', '403 Application disabled', '422 validation failed']),
    );
  });

  it('refuses a client whose HWID is blacklisted, as the REST gate does (one admission)', async () => {
    const fx = await appFixture(t);
    const [key] = await fx.keys(1);
    const ip = nextIp();
    const c = fx.client(ip);
    const session = await fx.session(c);
    const device = hwid('banned-device');
    expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
    await fx.owner.post(`/apps/${fx.app.id}/bans`, { type: 'hwid', value: device });
    expect(await c.post('/api/client/license', { session, license: key, hwid: device })).toMatchObject({
      status: 403,
      body: { detail: 'Access denied' },
    });
    expect(await refused(ChannelClient.connect(t.base, session, { ip }))).toMatchObject({
      status: 403,
      body: { detail: 'Access denied' },
    });
  });

  it('with require_signature the upgrade must be signed (docs/protocol.md 3, empty body) and its key is a nonce used once', async () => {
    const a = await activated(undefined, { require_signature: true });
    const unsigned = await refused(ChannelClient.connect(t.base, a.session, { ip: a.ip }));
    expect(unsigned).toMatchObject({ status: 401, body: { detail: 'Invalid request signature' } });
    const { generateKeyPairSync } = await import('node:crypto');
    const keyPair = generateKeyPairSync('x25519');
    const ch = await openChannel(t.base, a.session, { ip: a.ip, secret: a.f.app.api_secret, keyPair });
    ch.close();
    await ch.closed;
    const replayed = await refused(
      ChannelClient.connect(t.base, a.session, { ip: a.ip, secret: a.f.app.api_secret, keyPair }),
    );
    expect(replayed).toMatchObject({ status: 401, body: { detail: 'Invalid request signature' } });
    const wrongSecret = await refused(ChannelClient.connect(t.base, a.session, { ip: a.ip, secret: 'not-the-secret' }));
    expect(wrongSecret.status).toBe(401);
  });

  it('a GET without an upgrade is an ordinary signed client answer', async () => {
    const res = await fetch(`${t.base}/api/client/ws`, { headers: { 'x-nonce': 'plain-get-nonce-000001' } });
    expect(res.status).toBe(404);
    expect(res.headers.get('x-response-signature')).toBeTruthy();
    await res.arrayBuffer();
  });
});

describe('calls on the channel and switching transports', () => {
  it('one token chain across transports: each beat needs the latest token, a replay is refused on the other one', async () => {
    const a = await activated();
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    const start = await ch.call('heartbeat/start', { system_id: SYS });
    expect(start.status).toBe(200);
    expect(start.body.proof).toBe(
      createHmac('sha256', a.session).update(`kwhs1\n${SYS}\n${start.body.token}`).digest('base64'),
    );
    const ws1 = await ch.call('heartbeat', { token: start.body.token, system_id: SYS, beat_index: 1, code_hash: HASH });
    expect(ws1.status).toBe(200);
    expect(ws1.body.proof).toBe(
      createHmac('sha256', start.body.token)
        .update(`kwhb1\n${a.session}\n1\n${ws1.body.new_token}\n1`)
        .digest('base64'),
    );
    // The same beat again over REST: a replay.
    const replay = await a.c.post('/api/client/heartbeat', {
      session: a.session,
      token: ws1.body.new_token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
    });
    expect(replay.body).toEqual({ detail: 'rejected' });
    // Switch to REST with the latest token.
    const rest2 = await a.c.post('/api/client/heartbeat', {
      session: a.session,
      token: ws1.body.new_token,
      system_id: SYS,
      beat_index: 2,
      code_hash: HASH,
    });
    expect(rest2.status).toBe(200);
    expect(rest2.body.beat_count).toBe(2);
    // The channel's token is now stale: refused, nothing killed.
    expect(
      await ch.call('heartbeat', { token: ws1.body.new_token, system_id: SYS, beat_index: 3, code_hash: HASH }),
    ).toEqual({ status: 403, body: { detail: 'rejected' } });
    // Back to the channel with the token REST returned.
    const ws3 = await ch.call('heartbeat', {
      token: rest2.body.new_token,
      system_id: SYS,
      beat_index: 3,
      code_hash: HASH,
    });
    expect(ws3).toMatchObject({ status: 200, body: { beat_count: 3 } });
    expect((await a.f.owner.get(`/api/apps/${a.f.app.id}/logs?action=heartbeat.kill`)).body).toEqual([]);
    ch.close();
  });

  it('a heartbeat started over REST continues on the channel; the body cannot name another session', async () => {
    const a = await activated();
    const other = await activated(a.f);
    const start = await a.c.post('/api/client/heartbeat/start', { session: a.session, system_id: SYS });
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    // `session` in the body is ignored: the channel's own session is used.
    const b = await ch.call('heartbeat', {
      session: other.session,
      token: start.body.token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
    });
    expect(b.status).toBe(200);
    expect(t.server.app.domain.heartbeat.owner.host.peek(a.session)?.beatCount).toBe(1);
    ch.close();
  });

  it('one channel per session: a newer connection closes the older (4001) and carries on', async () => {
    const a = await activated();
    const first = await openChannel(t.base, a.session, { ip: a.ip });
    const start = await first.call('heartbeat/start', { system_id: SYS });
    const second = await openChannel(t.base, a.session, { ip: a.ip });
    expect(await first.closed).toEqual({ code: 4001, reason: 'superseded by a newer connection' });
    expect(
      (await second.call('heartbeat', { token: start.body.token, system_id: SYS, beat_index: 1, code_hash: HASH }))
        .status,
    ).toBe(200);
    second.close();
  });
});

describe('the server refuses client frames it cannot trust (1008)', () => {
  const cases: [string, (ch: ChannelClient) => void, string][] = [
    ['a wrong MAC', (ch) => ch.send({ type: 'ping' }, { key: Buffer.alloc(32, 7) }), 'bad MAC'],
    ['a frame of another connection (its keys)', (ch) => ch.send({ type: 'ping' }, { key: ch.s2c }), 'bad MAC'],
    [
      'seq 2 first (a dropped or reordered frame)',
      (ch) => ch.send({ type: 'ping' }, { seq: 2 }),
      'message out of order',
    ],
    ['an unknown type', (ch) => ch.send({ type: 'shell', cmd: 'ls' }), 'unknown message type'],
    ['an unknown call', (ch) => ch.send({ type: 'call', op: 'login', body: {} }), 'unknown call'],
    ['a text frame', (ch) => ch.ws.send('{"seq":1,"type":"ping"}'), 'binary frames only'],
  ];
  it.each(cases)('%s', async (_name, misbehave, reason) => {
    const a = await activated();
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    misbehave(ch);
    expect(await ch.closed).toEqual({ code: 1008, reason });
  });

  it('a replayed frame (seq repeated)', async () => {
    const a = await activated();
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    const seq = ch.send({ type: 'ping' });
    await ch.next('pong');
    ch.send({ type: 'ping' }, { seq });
    expect(await ch.closed).toEqual({ code: 1008, reason: 'message out of order' });
  });
});

describe('limits', () => {
  it('connections per IP on this worker: the next upgrade answers 429 until one closes', async () => {
    const saved = t.server.app.channel.limits.maxPerIp;
    t.server.app.channel.limits.maxPerIp = 2;
    try {
      const f = await appFixture(t);
      const ip = nextIp();
      const sessions: string[] = [];
      for (let i = 0; i < 3; i++) sessions.push((await activated(f)).session);
      const one = await openChannel(t.base, sessions[0]!, { ip });
      const two = await openChannel(t.base, sessions[1]!, { ip });
      const third = await refused(ChannelClient.connect(t.base, sessions[2]!, { ip }));
      expect(third).toMatchObject({ status: 429, body: { detail: 'Rate limit exceeded' } });
      expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
      // Another address is not affected.
      const elsewhere = await openChannel(t.base, sessions[2]!, { ip: nextIp() });
      elsewhere.close();
      one.close();
      await one.closed;
      const now = await openChannel(t.base, sessions[2]!, { ip });
      now.close();
      two.close();
    } finally {
      t.server.app.channel.limits.maxPerIp = saved;
    }
  });

  it('upgrades per IP per minute: the 61st answers 429', async () => {
    const ip = nextIp();
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++)
      statuses.push((await refused(ChannelClient.connect(t.base, 'Z'.repeat(43), { ip }))).status);
    expect(statuses.slice(0, 60).every((s) => s === 401)).toBe(true);
    expect(statuses[60]).toBe(429);
  });

  it('a client that does not read is dropped once 64 KiB wait to be sent', async () => {
    const a = await activated();
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    ch.ws.pause(); // stop reading: the kernel's buffers fill, then the server's own
    const dropped = t.server.app.channel.dropped;
    let gone = false;
    void ch.closed.then(() => (gone = true));
    // Pings are answered at once; the pongs pile up on the server until it cuts the client off.
    for (let sent = 0; !gone && sent < 300_000; sent += 2000) {
      for (let i = 0; i < 2000; i++) ch.send({ type: 'ping' });
      await new Promise((r) => setTimeout(r, 5));
      if (t.server.app.channel.dropped > dropped) break;
    }
    expect(t.server.app.channel.dropped).toBe(dropped + 1);
    ch.ws.resume();
    await ch.closed;
    expect(ch.refused).toBeUndefined(); // everything it did receive verified
  });
});

describe('shutdown', () => {
  it('closes every channel with 1001 (going away) so the clients reconnect to another worker', async () => {
    const other = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    try {
      const f = await appFixture(other);
      const [key] = await f.keys(1);
      const ip = nextIp();
      const c = f.client(ip);
      const session = await f.session(c);
      expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
      const ch = await openChannel(other.base, session, { ip });
      expect((await ch.call('heartbeat/start', { system_id: SYS })).status).toBe(200);
      const closing = other.server.shutdown('test');
      expect(await ch.closed).toEqual({ code: 1001, reason: 'server shutting down' });
      await closing;
    } finally {
      await other.close();
    }
  });
});

describe('audit', () => {
  it('calls on the channel write the same audit lines as REST', async () => {
    const a = await activated();
    const ch = await openChannel(t.base, a.session, { ip: a.ip });
    await ch.call('heartbeat/start', { system_id: SYS });
    await ch.call('heartbeat', { token: 'TT' + '0'.repeat(32), system_id: SYS, beat_index: 1, code_hash: HASH });
    const start = (await a.f.owner.get(`/api/apps/${a.f.app.id}/logs?action=client.heartbeat.start`)).body;
    expect(start.map((e: { detail: string; ip: string }) => [e.detail, e.ip])).toEqual([
      ['Heartbeat started (interval 30s)', a.ip],
    ]);
    const beats = (await a.f.owner.get(`/api/apps/${a.f.app.id}/logs?action=client.heartbeat`)).body;
    expect(beats.map((e: { detail: string; level: string }) => [e.detail, e.level])).toEqual([
      ['403 beat refused: wrong, stale or malformed token', 'warning'],
    ]);
    ch.close();
  });
});
