// docs/spec.md error tables of register, login and license, row by row, plus docs/protocol.md 2's rules.
// Every response's Ed25519 signature is verified by the test client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { decryptEnc, hwid, type ClientApi } from '../../helpers/client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

async function registered(f: AppFixture, username = 'alice', password = 'pw-alice-1', device = hwid('A')) {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/register', { session, username, password, license: key, hwid: device });
  if (r.status !== 200) throw new Error(`register failed: ${JSON.stringify(r.body)}`);
  return { key: key!, c, session };
}

async function fresh(f: AppFixture): Promise<{ c: ClientApi; session: string }> {
  const c = f.client();
  return { c, session: await f.session(c) };
}

describe('POST /api/client/register', () => {
  it('claims the key, creates the user with last_login null, and binds the key', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { level: 4, duration: 30, unit: 'days' });
    const { c, session } = await fresh(f);
    const before = Date.now();
    const r = await c.post('/api/client/register', {
      session,
      username: 'bob',
      password: 'pw-bob-1',
      license: key,
      hwid: 'HWID-UPPER-1',
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, message: expect.any(String), user: { username: 'bob', level: 4 } });
    const exp = Date.parse(r.body.user.expires_at);
    expect(exp).toBeGreaterThanOrEqual(before + 30 * 86_400_000 - 1000);
    expect(exp).toBeLessThanOrEqual(Date.now() + 30 * 86_400_000 + 1000);
    const [user] = await f.sql('select * from end_users where app_id = $1', [f.app.id]);
    expect(user).toMatchObject({ username: 'bob', last_login: null, level: 4, known_hwids: ['hwid-upper-1'] });
    const [k] = await f.sql('select status, used_by, user_id, hwid from license_keys where app_id = $1', [f.app.id]);
    expect(k).toEqual({ status: 'used', used_by: 'bob', user_id: user.id, hwid: 'hwid-upper-1' });
  });

  it.each([
    ['unknown key', async (_f: AppFixture) => ({ license: 'NOPE-NOPE-NOPE' }), 400, 'Invalid license key'],
    [
      'key of another app',
      async (_f: AppFixture) => ({ license: (await (await appFixture(t)).keys(1))[0] }),
      400,
      'Invalid license key',
    ],
    [
      'used key',
      async (f: AppFixture) => ({ license: (await registered(f, 'first')).key }),
      400,
      'License key already used',
    ],
    [
      'username taken',
      async (f: AppFixture) => {
        await registered(f, 'taken');
        return { username: 'taken' };
      },
      400,
      'Username already taken',
    ],
    [
      'banned key',
      async (f: AppFixture) => {
        const [k] = await f.keys(1);
        await f.sql(`update license_keys set status = 'banned' where app_id = $1 and status = 'unused'`, [f.app.id]);
        return { license: k };
      },
      403,
      'License key is banned',
    ],
  ])('%s', async (_name, setup, status, detail) => {
    const f = await appFixture(t);
    const over = await setup(f);
    const [key] = await f.keys(1);
    const { c, session } = await fresh(f);
    const r = await c.post('/api/client/register', {
      session,
      username: 'newbie',
      password: 'pw-new-1',
      license: key,
      hwid: hwid(),
      ...over,
    });
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ detail });
  });

  it('a failed finalise (username taken) returns the key to unused', async () => {
    const f = await appFixture(t);
    await registered(f, 'dup');
    const [key] = await f.keys(1, { note: 'second' });
    const { c, session } = await fresh(f);
    const r = await c.post('/api/client/register', {
      session,
      username: 'dup',
      password: 'pw-dup-2',
      license: key,
      hwid: hwid(),
    });
    expect(r.body).toEqual({ detail: 'Username already taken' });
    const [k] = await f.sql(
      `select status, used_by, pending_since from license_keys where note = 'second' and app_id = $1`,
      [f.app.id],
    );
    expect(k).toEqual({ status: 'unused', used_by: '', pending_since: null });
  });

  it.each([
    ['disabled', { enabled: false, disabled_message: 'Closed' }, 403, 'Closed'],
    ['keys paused', { keys_paused: true }, 403, 'License validation is temporarily paused for this application.'],
  ])('%s', async (_n, settings, status, detail) => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const { c, session } = await fresh(f);
    await f.owner.patch(`/apps/${f.app.id}`, settings);
    const r = await c.post('/api/client/register', {
      session,
      username: 'u1',
      password: 'pw-u1-111',
      license: key,
      hwid: hwid(),
    });
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ detail });
  });

  it('validates hwid length, password bytes and required fields with 422', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const { c, session } = await fresh(f);
    const base = { session, username: 'v', password: 'pw', license: key, hwid: hwid() };
    for (const [over, field] of [
      [{ hwid: 'short' }, 'hwid'],
      [{ hwid: 'h'.repeat(257) }, 'hwid'],
      [{ password: 'é'.repeat(37) }, 'password'],
      [{ license: undefined }, 'license'],
    ] as const) {
      const r = await c.post('/api/client/register', { ...base, ...over });
      expect(r.status, field).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['body', field]);
    }
    expect((await c.post('/api/client/register', { ...base, password: 'é'.repeat(36) })).status).toBe(200); // exactly 72 bytes
  });

  it('locks (app, username) or (app, IP) after 10 counted failures: 429 even for a correct attempt', async () => {
    const f = await appFixture(t);
    const { c, session } = await fresh(f);
    for (let i = 0; i < 10; i++) {
      const r = await c.post('/api/client/register', {
        session,
        username: `x${i}`,
        password: 'pw-x-1',
        license: `BAD-${i}`,
        hwid: hwid(),
      });
      expect(r.body, `attempt ${i + 1}`).toEqual({ detail: 'Invalid license key' });
    }
    const [key] = await f.keys(1);
    const locked = await c.post('/api/client/register', {
      session,
      username: 'good',
      password: 'pw-good-1',
      license: key,
      hwid: hwid(),
    });
    expect(locked.status).toBe(429);
    expect(locked.body).toEqual({ detail: 'Too many failed attempts, try again later.' });
  });

  it('allows 20 register calls per minute per IP, then 429 Rate limit exceeded', async () => {
    const f = await appFixture(t);
    const { c, session } = await fresh(f);
    for (let i = 0; i < 20; i++)
      await c.post('/api/client/register', { session, username: 'r', password: 'p', license: 'k', hwid: 'short' }); // 422s
    const r = await c.post('/api/client/register', {
      session,
      username: 'r',
      password: 'p',
      license: 'k',
      hwid: 'short',
    });
    expect(r.status).toBe(429);
    expect(r.body).toEqual({ detail: 'Rate limit exceeded' });
  });

  it('accepts a screenshot body up to 5 MiB, but only 16 KiB without one', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const { c, session } = await fresh(f);
    const padded = await c.post('/api/client/register', {
      session,
      username: 'pad',
      password: 'pw-pad-1',
      license: key,
      hwid: hwid(),
      note: 'x'.repeat(20_000),
    });
    expect(padded.status).toBe(413);
    // A PNG (docs/protocol.md 11.27 accepts PNG, JPEG and WebP, told by their first bytes).
    const shot = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(200_000, 7)]).toString('base64');
    const ok = await c.post('/api/client/register', {
      session,
      username: 'pad',
      password: 'pw-pad-1',
      license: key,
      hwid: hwid(),
      screenshot: shot,
    });
    expect(ok.status).toBe(200);
  });
});

describe('POST /api/client/login', () => {
  it('logs in, sets last_login and IP, and encrypts with the session enc_key', async () => {
    const f = await appFixture(t);
    await registered(f, 'carol', 'pw-carol-1');
    const c = f.client('203.0.113.77');
    const session = await f.session(c, { enc_key: 'secret-enc' }); // no init_iv: the init reply stays plain
    const r = await c.post('/api/client/login', {
      session,
      username: 'carol',
      password: 'pw-carol-1',
      hwid: hwid('A'),
      init_iv: 'iv-login',
    });
    expect(r.status).toBe(200);
    const body = decryptEnc(r.body.enc, 'secret-enc', f.app.api_secret, 'iv-login') as Record<string, any>;
    expect(body).toMatchObject({
      success: true,
      user: { username: 'carol', level: 1, expires_at: expect.any(String) },
    });
    const [u] = await f.sql('select last_login, ip from end_users where username = $1 and app_id = $2', [
      'carol',
      f.app.id,
    ]);
    expect(u.last_login).not.toBeNull();
    expect(u.ip).toBe('203.0.113.77');
    // Without init_iv the response is plain JSON; error bodies are never encrypted.
    expect(
      (await c.post('/api/client/login', { session, username: 'carol', password: 'pw-carol-1', hwid: hwid('A') })).body
        .success,
    ).toBe(true);
    expect(
      (
        await c.post('/api/client/login', {
          session,
          username: 'carol',
          password: 'wrong-pw',
          hwid: hwid('A'),
          init_iv: 'x',
        })
      ).body,
    ).toEqual({ detail: 'Invalid username or password' });
  });

  it('answers the same 401 for unknown user, wrong password, banned, expired and HWID mismatch', async () => {
    const f = await appFixture(t, { hwid_lock: true });
    await registered(f, 'dave', 'pw-dave-1', hwid('D1'));
    await registered(f, 'banned', 'pw-ban-1');
    await registered(f, 'expired', 'pw-exp-1');
    await f.sql(`update end_users set banned = true where username = 'banned' and app_id = $1`, [f.app.id]);
    await f.sql(
      `update end_users set expires_at = now() - interval '1 minute' where username = 'expired' and app_id = $1`,
      [f.app.id],
    );
    const attempts = [
      { username: 'nobody', password: 'pw-dave-1', hwid: hwid('D1') },
      { username: 'dave', password: 'pw-wrong-1', hwid: hwid('D1') },
      { username: 'banned', password: 'pw-ban-1', hwid: hwid('A') },
      { username: 'expired', password: 'pw-exp-1', hwid: hwid('A') },
      { username: 'dave', password: 'pw-dave-1', hwid: hwid('OTHER') },
    ];
    const bodies: string[] = [];
    for (const a of attempts) {
      const { c, session } = await fresh(f);
      const r = await c.post('/api/client/login', { session, ...a });
      expect(r.status, a.username).toBe(401);
      bodies.push(r.raw.toString());
    }
    expect(new Set(bodies)).toEqual(new Set(['{"detail":"Invalid username or password"}']));
    const { c, session } = await fresh(f);
    expect(
      (await c.post('/api/client/login', { session, username: 'dave', password: 'pw-dave-1', hwid: hwid('D1') }))
        .status,
    ).toBe(200);
  });

  it('with hwid_lock, the first login pins the HWID when none is stored and later logins must match', async () => {
    const f = await appFixture(t);
    await registered(f, 'erin', 'pw-erin-1', hwid('E1')); // registered while the lock was off: no HWID stored
    await f.owner.patch(`/apps/${f.app.id}`, { hwid_lock: true });
    const { c, session } = await fresh(f);
    expect(
      (await c.post('/api/client/login', { session, username: 'erin', password: 'pw-erin-1', hwid: hwid('E2') }))
        .status,
    ).toBe(200);
    expect(
      (await c.post('/api/client/login', { session, username: 'erin', password: 'pw-erin-1', hwid: hwid('E1') }))
        .status,
    ).toBe(401);
    expect(
      (
        await c.post('/api/client/login', {
          session,
          username: 'erin',
          password: 'pw-erin-1',
          hwid: hwid('E2').toUpperCase(),
        })
      ).status,
    ).toBe(200);
  });

  it.each([
    ['disabled', { enabled: false }, 403, 'Application disabled'],
    ['keys paused', { keys_paused: true }, 403, 'Access is temporarily paused for this application.'],
  ])('%s', async (_n, settings, status, detail) => {
    const f = await appFixture(t);
    await registered(f, 'frank', 'pw-frank-1');
    const { c, session } = await fresh(f);
    await f.owner.patch(`/apps/${f.app.id}`, settings);
    const r = await c.post('/api/client/login', {
      session,
      username: 'frank',
      password: 'pw-frank-1',
      hwid: hwid('A'),
    });
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ detail });
  });

  it('locks a username after 10 failures in 15 minutes, even against the right password', async () => {
    const f = await appFixture(t);
    await registered(f, 'gina', 'pw-gina-1');
    for (let i = 0; i < 10; i++) {
      const { c, session } = await fresh(f); // a new IP each time: the username lock is what trips
      expect(
        (await c.post('/api/client/login', { session, username: 'gina', password: `bad-${i}-pw`, hwid: hwid('A') }))
          .status,
      ).toBe(401);
    }
    const { c, session } = await fresh(f);
    const r = await c.post('/api/client/login', { session, username: 'gina', password: 'pw-gina-1', hwid: hwid('A') });
    expect(r.status).toBe(429);
    expect(r.body).toEqual({ detail: 'Too many failed attempts, try again later.' });
  });

  it('a deleted or banned key makes the bound user fail with 401', async () => {
    const f = await appFixture(t);
    const { key } = await registered(f, 'hank', 'pw-hank-1');
    void key;
    await f.sql(`update license_keys set status = 'banned' where used_by = 'hank' and app_id = $1`, [f.app.id]);
    const { c, session } = await fresh(f);
    expect(
      (await c.post('/api/client/login', { session, username: 'hank', password: 'pw-hank-1', hwid: hwid('A') })).status,
    ).toBe(401);
  });
});

describe('POST /api/client/license', () => {
  it('activates an unused key: used_by license-only, hwid pinned, expires_at stamped; the same device again succeeds', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { level: 2, duration: 2, unit: 'hours' });
    const { c, session } = await fresh(f);
    const r = await c.post('/api/client/license', { session, license: key, hwid: 'DEVICE-ONE-1' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, level: 2, expires_at: expect.any(String) });
    expect(Math.abs(Date.parse(r.body.expires_at) - Date.now() - 2 * 3600_000)).toBeLessThan(5000);
    const [k] = await f.sql('select status, used_by, hwid, last_login from license_keys where app_id = $1', [f.app.id]);
    expect(k).toMatchObject({ status: 'used', used_by: 'license-only', hwid: 'device-one-1' });
    const again = await c.post('/api/client/license', { session, license: key, hwid: 'device-one-1' });
    expect(again.status).toBe(200);
    expect(again.body.expires_at).toBe(r.body.expires_at);
  });

  it('lifetime keys activate with expires_at null', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { unit: 'lifetime' });
    const { c, session } = await fresh(f);
    const r = await c.post('/api/client/license', { session, license: key, hwid: hwid() });
    expect(r.body).toMatchObject({ success: true, expires_at: null });
  });

  it.each([
    ['unknown key', async () => 'NOPE', {}, 400, 'Invalid license key'],
    [
      'banned key',
      async (f: AppFixture, k: string) => {
        await f.sql(`update license_keys set status = 'banned' where app_id = $1`, [f.app.id]);
        return k;
      },
      {},
      403,
      'License key is banned',
    ],
    [
      'pending key',
      async (f: AppFixture, k: string) => {
        await f.sql(`update license_keys set status = 'pending', pending_since = now() where app_id = $1`, [f.app.id]);
        return k;
      },
      {},
      409,
      'License activation in progress, retry.',
    ],
    [
      'key in no valid state',
      async (f: AppFixture, k: string) => {
        await f.sql(`update license_keys set status = 'suspended' where app_id = $1`, [f.app.id]);
        return k;
      },
      {},
      403,
      'License not valid',
    ],
    [
      'another device with hwid_lock',
      async (f: AppFixture, k: string) => {
        const { c, session } = await fresh(f);
        await c.post('/api/client/license', { session, license: k, hwid: hwid('first') });
        return k;
      },
      { hwid_lock: true },
      403,
      'HWID mismatch. Key locked to another device.',
    ],
    [
      'expired key',
      async (f: AppFixture, k: string) => {
        const { c, session } = await fresh(f);
        await c.post('/api/client/license', { session, license: k, hwid: hwid() });
        await f.sql(`update license_keys set expires_at = now() - interval '1 second' where app_id = $1`, [f.app.id]);
        return k;
      },
      {},
      403,
      'License expired',
    ],
    [
      'keys paused',
      async (f: AppFixture, k: string) => k,
      { keys_paused: true },
      403,
      'License validation is temporarily paused for this application.',
    ],
    ['disabled', async (f: AppFixture, k: string) => k, { enabled: false, disabled_message: 'Nope' }, 403, 'Nope'],
  ])('%s', async (_name, setup, settings, status, detail) => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const license = await setup(f, key!);
    const { c, session } = await fresh(f);
    if (Object.keys(settings).length) await f.owner.patch(`/apps/${f.app.id}`, settings);
    const r = await c.post('/api/client/license', { session, license, hwid: hwid('other') });
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ detail });
  });

  it('without hwid_lock another device may use an activated key', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const a = await fresh(f);
    await a.c.post('/api/client/license', { session: a.session, license: key, hwid: hwid('one') });
    const b = await fresh(f);
    expect(
      (await b.c.post('/api/client/license', { session: b.session, license: key, hwid: hwid('two') })).status,
    ).toBe(200);
  });
});

describe('the shared gate', () => {
  it('401 for an unknown or malformed session', async () => {
    const f = await appFixture(t);
    for (const session of ['A'.repeat(43), 'short', 42]) {
      const r = await f.client().post('/api/client/license', { session, license: 'x', hwid: hwid() });
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ detail: 'Invalid or expired session' });
    }
  });

  it('403 Access denied for a blacklisted IP or HWID (any case), before the enabled check', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    await f.owner.post(`/apps/${f.app.id}/bans`, { type: 'ip', value: '192.0.2.66' });
    await f.owner.post(`/apps/${f.app.id}/bans`, { type: 'hwid', value: 'evil-device-1' });
    const blocked = f.client('192.0.2.66');
    const ipHit = await blocked.post('/api/client/init', { api_key: f.app.api_key });
    expect(ipHit.status).toBe(403);
    expect(ipHit.body).toEqual({ detail: 'Access denied' });
    const { c, session } = await fresh(f);
    await f.owner.patch(`/apps/${f.app.id}`, { enabled: false });
    const hwHit = await c.post('/api/client/license', { session, license: key, hwid: 'EVIL-DEVICE-1' });
    expect(hwHit.body).toEqual({ detail: 'Access denied' });
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).body).toEqual({
      detail: 'Application disabled',
    });
  });

  describe('request signatures (docs/protocol.md 3)', () => {
    it('accepts a correct signature and refuses missing headers, bad signatures, stale or future timestamps and replayed nonces', async () => {
      const f = await appFixture(t, { require_signature: true });
      const c = f.client();
      c.secret = f.app.api_secret;
      const ok = await c.post('/api/client/init', { api_key: f.app.api_key });
      expect(ok.status).toBe(200);
      const now = Math.floor(Date.now() / 1000);
      const cases: NonNullable<ClientApi['tamper']>[] = [
        { omit: 'signature' },
        { omit: 'timestamp' },
        { omit: 'nonce' },
        { signature: 'ab'.repeat(32) },
        { signature: 'zz' },
        // 310, not 301: a second may pass between reading the clock here and the server's check.
        { timestamp: String(now - 310) },
        { timestamp: String(now + 310) },
        { nonce: 'bad nonce!' },
      ];
      for (const tamper of cases) {
        c.tamper = tamper;
        const r = await c.post('/api/client/init', { api_key: f.app.api_key });
        expect(r.status, JSON.stringify(tamper)).toBe(401);
        expect(r.body).toEqual({ detail: 'Invalid request signature' });
      }
      c.tamper = { nonce: 'replayed-nonce-000001' };
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200);
      c.tamper = { nonce: 'replayed-nonce-000001' };
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(401);
      c.tamper = { timestamp: String(now - 290) };
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200);
    });

    it('after rotate-secret only the new secret verifies', async () => {
      const f = await appFixture(t, { require_signature: true });
      const c = f.client();
      c.secret = f.app.api_secret;
      const rotated = await f.owner.post(`/apps/${f.app.id}/rotate-secret`);
      expect(rotated.body.api_secret).not.toBe(f.app.api_secret);
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(401);
      c.secret = rotated.body.api_secret;
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200);
    });
  });

  it('writes an audit entry for every client call, success or failure', async () => {
    const f = await appFixture(t);
    const { c, session } = await fresh(f);
    await c.post('/api/client/license', { session, license: 'missing', hwid: hwid() });
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs`)).body.map(
      (l: { action: string; level: string }) => `${l.action}:${l.level}`,
    );
    expect(logs.slice(0, 2)).toEqual(['client.license:warning', 'client.init:info']);
  });
});

describe('remaining rows of the register, login and license tables', () => {
  it('register and login: 403 Heartbeat session required on an activated session without a live heartbeat', async () => {
    const f = await appFixture(t, { require_heartbeat: true });
    const [k1, k2] = await f.keys(2);
    const { c, session } = await fresh(f);
    expect(
      (
        await c.post('/api/client/register', {
          session,
          username: 'hb1',
          password: 'pw-hb1-1',
          license: k1,
          hwid: hwid(),
        })
      ).status,
    ).toBe(200);
    const reg = await c.post('/api/client/register', {
      session,
      username: 'hb2',
      password: 'pw-hb2-1',
      license: k2,
      hwid: hwid(),
    });
    expect(reg.status).toBe(403);
    expect(reg.body).toEqual({ detail: 'Heartbeat session required. Call /heartbeat/start first.' });
    const login = await c.post('/api/client/login', { session, username: 'hb1', password: 'pw-hb1-1', hwid: hwid() });
    expect(login.status).toBe(403);
    expect(login.body).toEqual({ detail: 'Heartbeat session required. Call /heartbeat/start first.' });
  });

  it.each(['login', 'license'])('%s: 20 calls per minute per IP, then 429 Rate limit exceeded', async (endpoint) => {
    const f = await appFixture(t);
    const { c, session } = await fresh(f);
    const body =
      endpoint === 'login'
        ? { session, username: 'x', password: 'p', hwid: 'short' }
        : { session, license: 'k', hwid: 'short' };
    for (let i = 0; i < 20; i++) expect((await c.post(`/api/client/${endpoint}`, body)).status).toBe(422);
    const r = await c.post(`/api/client/${endpoint}`, body);
    expect(r.status).toBe(429);
    expect(r.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
