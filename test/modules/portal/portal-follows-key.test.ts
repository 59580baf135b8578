// A portal session follows its key (docs/protocol.md 11.34): once the key is banned, expired or its
// application paused, GET /api/portal/me still answers and shows that state, and every portal
// write answers docs/spec.md's license error for it; once the key or the end user is deleted, the session
// is gone (401).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';

let t: TestServer;
let f: AppFixture;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t, { portal_enabled: true, offline_days: 7, portal_reset_cooldown_hours: 0 });
}, 120_000);
afterAll(() => t.close());

const portal = new (class {
  call(method: string, path: string, token: string, body?: unknown) {
    return new Api(t.base).call(method, path, body, { token, headers: { 'x-forwarded-for': nextIp() } });
  }
})();

/** A license-only key activated on a device, signed in to the portal with the key. */
async function customer() {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  const device = hwid(Math.floor(Math.random() * 1e8));
  expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
  const login = await new Api(t.base).post(
    '/api/portal/login',
    { api_key: f.app.api_key, license: key },
    { token: '', headers: { 'x-forwarded-for': nextIp() } },
  );
  expect(login.status).toBe(200);
  const [row] = await f.sql<{ id: string }>(
    'select id from license_keys where app_id = $1 order by created_at desc limit 1',
    [f.app.id],
  );
  return { token: login.body.token as string, device, licenseId: row!.id };
}

/** Every portal write, as the customer would send it. */
const writes = (token: string, device: string) => [
  portal.call('POST', '/api/portal/reset-hwid', token, { hwid: device }),
  portal.call('POST', '/api/portal/offline', token, { hwid: device }),
];

describe('portal sessions follow their key', () => {
  it('banned: me shows it, every write is 403 License key is banned; unbanned, writes work again', async () => {
    const x = await customer();
    expect((await f.owner.patch(`/api/licenses/${x.licenseId}/ban`, { banned: true })).status).toBe(200);
    const me = await portal.call('GET', '/api/portal/me', x.token);
    expect(me.status).toBe(200);
    expect(me.body.license.computed_status).toBe('banned');
    for (const r of await Promise.all(writes(x.token, x.device))) {
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ detail: 'License key is banned' });
    }
    expect((await f.owner.patch(`/api/licenses/${x.licenseId}/ban`, { banned: false })).status).toBe(200);
    expect((await portal.call('POST', '/api/portal/offline', x.token, { hwid: x.device })).status).toBe(200);
  });

  it('expired: every write is 403 License expired', async () => {
    const x = await customer();
    await f.sql(`update license_keys set expires_at = now() - interval '1 minute' where id = $1`, [x.licenseId]);
    expect((await portal.call('GET', '/api/portal/me', x.token)).body.license.computed_status).toBe('expired');
    for (const r of await Promise.all(writes(x.token, x.device))) {
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ detail: 'License expired' });
    }
  });

  it('paused: every write is 403 with the pause text; the reset did not happen', async () => {
    const x = await customer();
    expect((await f.owner.patch(`/apps/${f.app.id}`, { keys_paused: true })).status).toBe(200);
    try {
      for (const r of await Promise.all(writes(x.token, x.device))) {
        expect(r.status).toBe(403);
        expect(r.body).toEqual({ detail: 'License validation is temporarily paused for this application.' });
      }
      const me = await portal.call('GET', '/api/portal/me', x.token);
      expect(me.body.license.devices.map((d: { hwid: string }) => d.hwid)).toEqual([x.device.toLowerCase()]);
    } finally {
      await f.owner.patch(`/apps/${f.app.id}`, { keys_paused: false });
    }
  });

  it('deleted: the session is gone (401) for reads and writes', async () => {
    const x = await customer();
    expect((await f.owner.delete(`/api/licenses/${x.licenseId}`)).status).toBe(200);
    expect((await portal.call('GET', '/api/portal/me', x.token)).status).toBe(401);
    for (const r of await Promise.all(writes(x.token, x.device))) expect(r.status).toBe(401);
  });
});
