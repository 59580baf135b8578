// The customer portal's API (docs/protocol.md 14.1-14.3) against a real server: every sign-in failure with its
// exact answer, the client lockouts and the 20/min per-IP budget, the kw_portal cookie and its Origin
// check, tokens that open only their own side, a customer seeing only itself, and a device reset that
// ends the key's live heartbeat session and then holds a cooldown (429 with Retry-After).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';

let t: TestServer;
let f: AppFixture;

beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t, { portal_enabled: true });
}, 120_000);
afterAll(() => t.close());

/** A portal caller from its own address (limits and lockouts of one test don't touch another). */
function customer(ip = nextIp()) {
  const api = new Api(t.base);
  const headers = { 'x-forwarded-for': ip };
  return {
    ip,
    login: (body: Record<string, unknown>, extra: Record<string, string> = {}) =>
      api.post('/api/portal/login', body, { token: '', headers: { ...headers, ...extra } }),
    call: (method: string, path: string, token: string, body?: unknown, extra: Record<string, string> = {}) =>
      api.call(method, path, body, { token, headers: { ...headers, ...extra } }),
  };
}

/** A license-only key activated on `device`, and a client session on it. */
async function activated(device = hwid(Math.floor(Math.random() * 1e8))) {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
  return { key: key!, c, session, device };
}

async function registered(username: string, password: string) {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/register', { session, username, password, license: key, hwid: hwid(username) });
  expect(r.status).toBe(200);
  return { key: key! };
}

describe('portal sign-in', () => {
  it('answers every failure exactly', async () => {
    const c = customer();
    const { key } = await activated();
    const { key: userKey } = await registered('alice', 'alice-pass-1');
    const off = await appFixture(t);
    expect((await c.login({ api_key: 'f'.repeat(32), license: key })).body).toEqual({
      detail: 'Application not found',
    });
    const disabled = await c.login({ api_key: off.app.api_key, license: key });
    expect([disabled.status, disabled.body]).toEqual([
      403,
      { detail: 'Customer portal is not enabled for this application.' },
    ]);
    const invalid = { detail: 'Invalid credentials' };
    const wrongKey = await c.login({ api_key: f.app.api_key, license: 'NOPE-NOPE-NOPE' });
    expect([wrongKey.status, wrongKey.body]).toEqual([401, invalid]);
    expect((await c.login({ api_key: f.app.api_key, license: userKey })).body).toEqual(invalid);
    expect((await c.login({ api_key: f.app.api_key, username: 'alice', password: 'wrong-pass' })).body).toEqual(
      invalid,
    );
    expect((await c.login({ api_key: f.app.api_key, username: 'nobody', password: 'wrong-pass' })).body).toEqual(
      invalid,
    );
    const [banned] = await f.keys(1);
    const ids = await f.sql('select id from license_keys where note = $1 order by created_at desc limit 1', ['']);
    void ids;
    const list = (await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=1`)).body.items;
    await f.owner.patch(`/api/licenses/${list[0].id}/ban`, { banned: true });
    expect((await c.login({ api_key: f.app.api_key, license: banned })).body).toEqual(invalid);
    expect((await c.login({ api_key: f.app.api_key })).status).toBe(422);
  });

  it('signs in a key or an end user: a token and an HttpOnly SameSite=Strict kw_portal cookie for 24 h', async () => {
    const c = customer();
    const { key } = await activated();
    const byKey = await c.login({ api_key: f.app.api_key, license: key });
    expect(byKey.status).toBe(200);
    expect(byKey.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const setCookie = byKey.headers.get('set-cookie')!;
    expect(setCookie).toContain(`kw_portal=${byKey.body.token}`);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Max-Age=86400/);
    await registered('bob', 'bob-pass-1');
    const byUser = await c.login({ api_key: f.app.api_key, username: 'bob', password: 'bob-pass-1' });
    expect(byUser.status).toBe(200);
    const me = await c.call('GET', '/api/portal/me', byUser.body.token);
    expect(me.body.user).toMatchObject({ username: 'bob' });
  });

  it('locks an address out after 10 failures, like client login (even a right key then answers 429)', async () => {
    const c = customer();
    const { key } = await activated();
    for (let i = 0; i < 10; i++)
      expect((await c.login({ api_key: f.app.api_key, license: `WRONG-${i}` })).status).toBe(401);
    const locked = await c.login({ api_key: f.app.api_key, license: key });
    expect([locked.status, locked.body]).toEqual([429, { detail: 'Too many failed attempts, try again later.' }]);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    // The name lockout is the client's own: ten portal failures lock /api/client/login for that name too.
    await registered('carol', 'carol-pass-1');
    for (let i = 0; i < 10; i++) {
      const other = customer();
      await other.login({ api_key: f.app.api_key, username: 'carol', password: `nope-${i}` });
    }
    const cl = f.client();
    const session = await f.session(cl);
    const login = await cl.post('/api/client/login', {
      session,
      username: 'carol',
      password: 'carol-pass-1',
      hwid: hwid('carol'),
    });
    expect(login.status).toBe(429);
  });

  it('allows 20 sign-ins a minute per address, then 429 Rate limit exceeded', async () => {
    const c = customer();
    const { key } = await activated();
    for (let i = 0; i < 20; i++) expect((await c.login({ api_key: f.app.api_key, license: key })).status).toBe(200);
    const over = await c.login({ api_key: f.app.api_key, license: key });
    expect([over.status, over.body]).toEqual([429, { detail: 'Rate limit exceeded' }]);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('refuses a sign-in from a foreign Origin (login CSRF)', async () => {
    const c = customer();
    const { key } = await activated();
    const r = await c.login({ api_key: f.app.api_key, license: key }, { origin: 'https://evil.example' });
    expect([r.status, r.body]).toEqual([403, { detail: 'Cross-site request refused' }]);
  });
});

describe('portal sessions', () => {
  it('a cookie write needs the page own Origin; bearer calls and reads do not', async () => {
    const c = customer();
    const { key } = await activated();
    const token = (await c.login({ api_key: f.app.api_key, license: key })).body.token;
    await t.server.services.sql.run('update applications set portal_reset_cooldown_hours = 0 where id = ?', [f.app.id]);
    const host = new URL(t.base).host;
    const byCookie = (origin?: string) =>
      c.call('POST', '/api/portal/reset-hwid', '', {}, { cookie: `kw_portal=${token}`, ...(origin ? { origin } : {}) });
    expect((await byCookie()).body).toEqual({ detail: 'Cross-site request refused' });
    expect((await byCookie('https://evil.example')).status).toBe(403);
    expect((await byCookie(`http://${host}`)).status).toBe(200);
    expect((await c.call('GET', '/api/portal/me', '', undefined, { cookie: `kw_portal=${token}` })).status).toBe(200);
    expect((await c.call('POST', '/api/portal/reset-hwid', token, {})).status).toBe(200);
    await t.server.services.sql.run('update applications set portal_reset_cooldown_hours = 24 where id = ?', [
      f.app.id,
    ]);
  });

  it('portal tokens open no dashboard route and dashboard tokens no portal route', async () => {
    const c = customer();
    const { key } = await activated();
    const token = (await c.login({ api_key: f.app.api_key, license: key })).body.token;
    expect((await c.call('GET', '/api/apps', token)).status).toBe(401);
    expect((await c.call('GET', `/api/apps/${f.app.id}/licenses`, token)).status).toBe(401);
    expect((await c.call('GET', '/api/portal/me', f.owner.token!)).status).toBe(401);
    const apiToken = (await f.owner.post('/api/tokens', { name: 'p', scopes: ['licenses:read'], app_ids: null })).body;
    expect((await c.call('GET', '/api/portal/me', apiToken.token)).status).toBe(401);
    expect((await c.call('GET', '/api/portal/me', 'garbage%zz')).status).toBe(401);
    expect((await c.call('GET', '/api/portal/me', '', undefined, { cookie: 'kw_portal=%E0%A4%A' })).status).toBe(401);
    expect((await c.call('POST', '/api/portal/logout', token)).status).toBe(200);
    expect((await c.call('GET', '/api/portal/me', token)).status).toBe(401);
  });

  it('me shows the customer its own license and devices, nothing of other customers, IPs or geo', async () => {
    const c = customer();
    const mine = await activated('mine-device-0001');
    const theirs = await activated('their-device-0002');
    const token = (await c.login({ api_key: f.app.api_key, license: mine.key })).body.token;
    const me = await c.call('GET', '/api/portal/me', token);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({
      app: { name: f.app.name, offline_days: 0 },
      license: {
        computed_status: 'active',
        level: 1,
        entitlements: [],
        max_devices: 1,
        live_sessions: 0,
        devices: [{ hwid: 'mine-device-0001' }],
      },
      user: null,
      next_reset_at: null,
    });
    expect(me.body.license.key_preview).toBe(`${mine.key.slice(0, 4)}****${mine.key.slice(-4)}`);
    expect(me.body.license.devices[0].last_seen).toMatch(/Z$/);
    const text = JSON.stringify(me.body);
    expect(text).not.toContain('their-device');
    expect(text).not.toContain(theirs.key.slice(-4) + '"');
    for (const field of ['ip', 'geo', 'reseller', 'owner', 'api_secret', 'country'])
      expect(text.toLowerCase()).not.toContain(`"${field}`);
  });
});

describe('portal device reset', () => {
  it('clears the device, ends the live heartbeat session, audits, and then holds the cooldown', async () => {
    const c = customer();
    const live = await activated('reset-device-0001');
    const start = await live.c.post('/api/client/heartbeat/start', { session: live.session, system_id: 'system-0001' });
    expect(start.status).toBe(200);
    const token = (await c.login({ api_key: f.app.api_key, license: live.key })).body.token;
    expect((await c.call('GET', '/api/portal/me', token)).body.license.live_sessions).toBe(1);
    const unknown = await c.call('POST', '/api/portal/reset-hwid', token, { hwid: 'not-mine' });
    expect([unknown.status, unknown.body]).toEqual([404, { detail: 'Device not found' }]);
    const reset = await c.call('POST', '/api/portal/reset-hwid', token, { hwid: 'reset-device-0001' });
    expect(reset.status).toBe(200);
    const beat = await live.c.post('/api/client/heartbeat', {
      session: live.session,
      token: start.body.token,
      system_id: 'system-0001',
      beat_index: 1,
      code_hash: 'c0de'.repeat(8),
    });
    expect([beat.status, beat.body]).toEqual([403, { detail: 'rejected' }]);
    const me = (await c.call('GET', '/api/portal/me', token)).body;
    expect(me.license.devices).toEqual([]);
    expect(Date.parse(me.next_reset_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);
    const again = await c.call('POST', '/api/portal/reset-hwid', token, {});
    expect([again.status, again.body]).toEqual([429, { detail: 'Device reset is on cooldown.' }]);
    const retry = Number(again.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(23 * 3600);
    expect(retry).toBeLessThanOrEqual(24 * 3600);
    // The key activates on a new device.
    const fresh = f.client();
    const s2 = await f.session(fresh);
    expect(
      (await fresh.post('/api/client/license', { session: s2, license: live.key, hwid: 'new-pc-0001' })).status,
    ).toBe(200);
    await t.server.services.audit.repository.flush();
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=portal.reset_hwid`)).body;
    expect((Array.isArray(logs) ? logs : logs.items).length).toBeGreaterThan(0);
  });
});

describe('portal password', () => {
  it('changes an end user password (72-byte limit); a key customer has none', async () => {
    const c = customer();
    await registered('dave', 'dave-pass-1');
    const token = (await c.login({ api_key: f.app.api_key, username: 'dave', password: 'dave-pass-1' })).body.token;
    const long = await c.call('POST', '/api/portal/password', token, {
      current_password: 'dave-pass-1',
      password: 'é'.repeat(37),
    });
    expect(long.status).toBe(422);
    const wrong = await c.call('POST', '/api/portal/password', token, {
      current_password: 'x',
      password: 'new-pass-2',
    });
    expect([wrong.status, wrong.body]).toEqual([400, { detail: 'Current password is incorrect' }]);
    const ok = await c.call('POST', '/api/portal/password', token, {
      current_password: 'dave-pass-1',
      password: 'new-pass-2',
    });
    expect(ok.status).toBe(200);
    expect((await c.login({ api_key: f.app.api_key, username: 'dave', password: 'new-pass-2' })).status).toBe(200);
    expect((await c.login({ api_key: f.app.api_key, username: 'dave', password: 'dave-pass-1' })).status).toBe(401);
    const k = customer();
    const { key } = await activated();
    const kt = (await k.login({ api_key: f.app.api_key, license: key })).body.token;
    const none = await k.call('POST', '/api/portal/password', kt, { current_password: 'a', password: 'b-pass-123' });
    expect(none.status).toBe(403);
  });

  it('the app carries portal_enabled and portal_reset_cooldown_hours (0-8760)', async () => {
    const got = (await f.owner.get(`/api/apps/${f.app.id}`)).body;
    expect(got).toMatchObject({ portal_enabled: true, portal_reset_cooldown_hours: 24 });
    expect((await f.owner.patch(`/api/apps/${f.app.id}`, { portal_reset_cooldown_hours: 8761 })).status).toBe(422);
    expect((await f.owner.patch(`/api/apps/${f.app.id}`, { portal_reset_cooldown_hours: 2 })).body).toMatchObject({
      portal_reset_cooldown_hours: 2,
    });
    await f.owner.patch(`/api/apps/${f.app.id}`, { portal_reset_cooldown_hours: 24 });
  });
});

describe('portal on the licensing models', () => {
  it('lists every device of the key, removes one or all (freeing their places), and issues offline files', async () => {
    const g = await appFixture(t, {
      portal_enabled: true,
      portal_reset_cooldown_hours: 0,
      hwid_lock: true,
      max_devices: 2,
      offline_days: 7,
    });
    const [key] = await g.keys(1);
    for (const device of ['model-device-a001', 'model-device-b002']) {
      const c = g.client();
      const session = await g.session(c);
      expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
    }
    const c = customer();
    const token = (await c.login({ api_key: g.app.api_key, license: key })).body.token;
    const me = (await c.call('GET', '/api/portal/me', token)).body;
    expect(me.license.max_devices).toBe(2);
    expect(me.app.offline_days).toBe(7);
    expect(me.license.devices.map((d: { hwid: string }) => d.hwid)).toEqual(['model-device-a001', 'model-device-b002']);

    const file = await c.call('POST', '/api/portal/offline', token, { hwid: 'MODEL-DEVICE-B002' });
    expect(file.status).toBe(200);
    const [, payload] = (file.body.license_file as string).split('.');
    expect(JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'))).toMatchObject({
      v: 1,
      app_id: g.app.id,
      hwid: 'model-device-b002',
      user: null,
    });
    const stranger = await c.call('POST', '/api/portal/offline', token, { hwid: 'someone-else-0001' });
    expect([stranger.status, stranger.body]).toEqual([403, { detail: 'HWID mismatch. Key locked to another device.' }]);

    expect((await c.call('POST', '/api/portal/reset-hwid', token, { hwid: 'model-device-a001' })).status).toBe(200);
    const one = (await c.call('GET', '/api/portal/me', token)).body;
    expect(one.license.devices.map((d: { hwid: string }) => d.hwid)).toEqual(['model-device-b002']);
    // The freed place takes a new machine; the limit holds for the one after it.
    const places = async (device: string) => {
      const n = g.client();
      const session = await g.session(n);
      return (await n.post('/api/client/license', { session, license: key, hwid: device })).status;
    };
    expect(await places('model-device-c003')).toBe(200);
    expect(await places('model-device-d004')).toBe(403);

    expect((await c.call('POST', '/api/portal/reset-hwid', token, {})).status).toBe(200);
    expect((await c.call('GET', '/api/portal/me', token)).body.license.devices).toEqual([]);
    const gone = await c.call('POST', '/api/portal/offline', token, { hwid: 'model-device-b002' });
    expect(gone.status).toBe(403);
    expect(await places('model-device-d004')).toBe(200);
  });

  it('answers 403 when the application issues no offline files', async () => {
    const c = customer();
    const { key, device } = await activated('no-offline-0001');
    const token = (await c.login({ api_key: f.app.api_key, license: key })).body.token;
    const r = await c.call('POST', '/api/portal/offline', token, { hwid: device });
    expect([r.status, r.body]).toEqual([403, { detail: 'Offline licenses are not enabled for this application.' }]);
  });
});
