// Activation by file for air-gapped machines (docs/air-gapped.md) against a real server: a request is
// answered on the dashboard and in the portal exactly as `license` would answer the machine (devices,
// hwid_lock, limits, expiry stamping, bans, the same errors), with a file bound to the request's nonce.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { activationRequest, verifiedPayload } from './airgap-harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
}, 120_000);
afterAll(() => t.close());

const DAY = 86_400_000;

async function keyRow(f: AppFixture, key: string) {
  const r = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=1000`);
  return r.body.items.find((k: { key_preview: string }) => k.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`);
}

function answer(api: Api, appId: string, request: string) {
  return api.post(`/api/apps/${appId}/offline-activations`, { request });
}

/** `license` from a fresh client for the same key and HWID: the answer the file path must match. */
async function licenseAnswer(f: AppFixture, key: string, hwid: string) {
  const c = f.client();
  const session = await f.session(c);
  return c.post('/api/client/license', { session, license: key, hwid });
}

describe('POST /api/apps/{id}/offline-activations', () => {
  it('activates an unused key license-only on the HWID and answers a signed file carrying the nonce', async () => {
    const f = await appFixture(t, { hwid_lock: true });
    const [key] = await f.keys(1, { duration: 30, unit: 'days', level: 2 });
    const { request, nonce } = activationRequest(f.app.id, key!, 'AIR-Machine-1');
    const r = await answer(f.owner, f.app.id, request);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(Object.keys(r.body)).toEqual(['response']);
    const p = await verifiedPayload(f.owner, r.body.response, 'kwlic1');
    const row = await keyRow(f, key!);
    expect(row).toMatchObject({ status: 'used', used_by: 'license-only', hwid: 'air-machine-1' });
    expect(row.devices.map((d: { hwid: string }) => d.hwid)).toEqual(['air-machine-1']);
    expect(p).toMatchObject({
      v: 1,
      app_id: f.app.id,
      license_id: row.id,
      hwid: 'air-machine-1',
      level: 2,
      expires_at: row.expires_at,
      request_nonce: nonce,
    });
    // The expiry was stamped as an activation stamps it: 30 days from now.
    expect(Math.abs(Date.parse(row.expires_at) - Date.now() - 30 * DAY)).toBeLessThan(120_000);
    // offline_days is 0 here: the file lasts one day all the same.
    expect(Date.parse(p.valid_until) - Date.parse(p.issued_at)).toBe(DAY);
    // The same machine asks again (a new request): the held device is accepted, a new nonce answered.
    const again = activationRequest(f.app.id, key!, 'air-machine-1');
    const r2 = await answer(f.owner, f.app.id, again.request);
    expect((await verifiedPayload(f.owner, r2.body.response, 'kwlic1')).request_nonce).toBe(again.nonce);
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.offline_activation`);
    expect(JSON.stringify(logs.body)).toContain('license.offline_activation');
  });

  it('lasts offline_days when that is set', async () => {
    const f = await appFixture(t, { offline_days: 7 });
    const [key] = await f.keys(1, { duration: 365, unit: 'days' });
    const r = await answer(f.owner, f.app.id, activationRequest(f.app.id, key!, 'air-machine-2').request);
    const p = await verifiedPayload(f.owner, r.body.response, 'kwlic1');
    expect(Date.parse(p.valid_until) - Date.parse(p.issued_at)).toBe(7 * DAY);
  });

  it('422 on `request` when it does not parse or names another application', async () => {
    const f = await appFixture(t);
    const other = await appFixture(t);
    const [key] = await f.keys(1);
    const bad = [
      'nonsense',
      'kwreq1.',
      'kwreq1.!!!',
      `kwreq1.${Buffer.from('[1,2]').toString('base64url')}`,
      activationRequest(f.app.id, key!, 'machine-h', { extra: { v: 2 } }).request,
      activationRequest(f.app.id, key!, 'machine-h', { nonce: 'c2hvcnQ' }).request,
      activationRequest(f.app.id, key!, 'short', { extra: {} }).request,
      activationRequest(f.app.id, key!, 'machine-h', { extra: { created_at: 'yesterday' } }).request,
      activationRequest(other.app.id, key!, 'machine-h').request,
    ];
    for (const request of bad) {
      const r = await answer(f.owner, f.app.id, request);
      expect(r.status, request).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['body', 'request']);
    }
    expect((await answer(f.owner, f.app.id, '')).status).toBe(422);
    expect((await f.owner.post(`/api/apps/${f.app.id}/offline-activations`, {})).status).toBe(422);
    // Nothing was activated by any of them.
    expect((await keyRow(f, key!)).status).toBe('unused');
  });

  it('refuses exactly as `license`: unknown, banned, expired, paused, blacklisted HWID, device limit', async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 1 });
    const [k1, k2, k3] = await f.keys(3);
    // Unknown key.
    const unknown = await answer(f.owner, f.app.id, activationRequest(f.app.id, 'NOPE-NOPE', 'machine-m1').request);
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual((await licenseAnswer(f, 'NOPE-NOPE', 'machine-m1')).body);
    expect(unknown.body).toEqual({ detail: 'Invalid license key' });
    // The device limit: one machine holds the key, a second is docs/spec.md's HWID mismatch.
    expect((await answer(f.owner, f.app.id, activationRequest(f.app.id, k1!, 'machine-m1').request)).status).toBe(200);
    const second = await answer(f.owner, f.app.id, activationRequest(f.app.id, k1!, 'machine-m2').request);
    expect(second.status).toBe(403);
    expect(second.body).toEqual({ detail: 'HWID mismatch. Key locked to another device.' });
    expect((await licenseAnswer(f, k1!, 'machine-m2')).body).toEqual(second.body);
    // A banned key.
    const row2 = await keyRow(f, k2!);
    expect((await f.owner.patch(`/api/licenses/${row2.id}/ban`, { banned: true })).status).toBe(200);
    const banned = await answer(f.owner, f.app.id, activationRequest(f.app.id, k2!, 'machine-m3').request);
    expect(banned.status).toBe(403);
    expect(banned.body).toEqual({ detail: 'License key is banned' });
    // An expired key.
    const row1 = await keyRow(f, k1!);
    await f.sql(`update license_keys set expires_at = now() - interval '1 minute' where id = $1`, [row1.id]);
    const expired = await answer(f.owner, f.app.id, activationRequest(f.app.id, k1!, 'machine-m1').request);
    expect(expired.body).toEqual({ detail: 'License expired' });
    expect((await licenseAnswer(f, k1!, 'machine-m1')).body).toEqual(expired.body);
    // A blacklisted HWID (the app's bans).
    expect((await f.owner.post(`/api/apps/${f.app.id}/bans`, { type: 'hwid', value: 'BANNED-1' })).status).toBe(200);
    const ban = await answer(f.owner, f.app.id, activationRequest(f.app.id, k3!, 'banned-1').request);
    expect(ban.status).toBe(403);
    expect(ban.body).toEqual({ detail: 'Access denied' });
    // Paused validation.
    expect((await f.owner.patch(`/apps/${f.app.id}`, { keys_paused: true })).status).toBe(200);
    const paused = await answer(f.owner, f.app.id, activationRequest(f.app.id, k3!, 'machine-m4').request);
    expect(paused.body).toEqual({ detail: 'License validation is temporarily paused for this application.' });
    expect((await keyRow(f, k3!)).status).toBe('unused');
  });

  it('owners, admins, developers; resellers with generate_keys for their own keys; tokens with licenses:write', async () => {
    const f = await appFixture(t);
    const mk = async (name: string, permissions: Record<string, boolean>) => {
      const r = await f.owner.post('/api/team', {
        username: name,
        password: 'seller-pass-1',
        allowed_apps: [f.app.id],
        permissions,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return new Api(t.base).signIn(name, 'seller-pass-1');
    };
    const plain = await mk('agplain', { view_keys: true });
    const seller = await mk('agseller', { view_keys: true, generate_keys: true });
    const [ownerKey] = await f.keys(1);
    const sellerKey = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 5 })).body[0].key;
    const denied = await answer(plain, f.app.id, activationRequest(f.app.id, sellerKey, 'machine-r1').request);
    expect(denied.status).toBe(403);
    expect((await answer(seller, f.app.id, activationRequest(f.app.id, sellerKey, 'machine-r1').request)).status).toBe(
      200,
    );
    // Outside its scope a key reads as unknown, and stays unused.
    const foreign = await answer(seller, f.app.id, activationRequest(f.app.id, ownerKey!, 'machine-r2').request);
    expect(foreign.body).toEqual({ detail: 'Invalid license key' });
    expect((await keyRow(f, ownerKey!)).status).toBe('unused');
    const token = async (scopes: string[]) =>
      f.owner.as((await f.owner.post('/api/tokens', { name: `ag${scopes.join()}`, scopes, app_ids: null })).body.token);
    const writer = await token(['licenses:write']);
    expect((await answer(writer, f.app.id, activationRequest(f.app.id, ownerKey!, 'machine-r3').request)).status).toBe(
      200,
    );
    const appsOnly = await token(['apps:write', 'apps:read']);
    expect(
      (await answer(appsOnly, f.app.id, activationRequest(f.app.id, ownerKey!, 'machine-r3').request)).body,
    ).toEqual({
      detail: 'Token scope does not allow this action',
    });
  });
});

describe('POST /api/portal/offline-activation', () => {
  it("answers the signed-in customer's own request; another key's is refused; no sign-in is 401", async () => {
    const f = await appFixture(t, { portal_enabled: true, offline_days: 3 });
    const [mine, theirs] = await f.keys(2);
    const ip = nextIp();
    const customer = new Api(t.base);
    const login = await customer.post(
      '/api/portal/login',
      { api_key: f.app.api_key, license: mine },
      { token: '', headers: { 'x-forwarded-for': ip } },
    );
    expect(login.status).toBe(200);
    const portal = customer.as(login.body.token);
    const { request, nonce } = activationRequest(f.app.id, mine!, 'Portal-PC');
    const r = await portal.post('/api/portal/offline-activation', { request });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const p = await verifiedPayload(f.owner, r.body.response, 'kwlic1');
    expect(p).toMatchObject({ hwid: 'portal-pc', request_nonce: nonce, app_id: f.app.id });
    expect(Date.parse(p.valid_until) - Date.parse(p.issued_at)).toBe(3 * DAY);
    expect(await keyRow(f, mine!)).toMatchObject({ status: 'used', used_by: 'license-only' });
    const other = await portal.post('/api/portal/offline-activation', {
      request: activationRequest(f.app.id, theirs!, 'Portal-PC').request,
    });
    expect(other.status).toBe(422);
    expect(other.body.detail[0].loc).toEqual(['body', 'request']);
    expect((await keyRow(f, theirs!)).status).toBe('unused');
    const garbage = await portal.post('/api/portal/offline-activation', { request: 'kwreq1.x' });
    expect(garbage.status).toBe(422);
    expect((await new Api(t.base).post('/api/portal/offline-activation', { request })).status).toBe(401);
    // A dashboard token opens no portal route.
    expect((await f.owner.post('/api/portal/offline-activation', { request })).status).toBe(401);
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.offline_activation`);
    expect(JSON.stringify(logs.body)).toContain('portal');
  });
});
