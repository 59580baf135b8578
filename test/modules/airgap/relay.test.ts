// Seat pools and `keywarden relay` (docs/air-gapped.md): pools issued by a real server and checked under
// its published key; a real relay process that refuses a pool it cannot serve, leases seats by HWID,
// renews and releases them, refuses past its seats, and keeps its leases across restarts (a clean stop
// and a kill).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { signPool } from '../../../src/modules/airgap/pool-file.js';
import { publicKey, verifiedPayload } from './airgap-harness.js';
import { relayIdHere, relayRefusal, spawnRelay, type RelayProcess } from './relay-process.js';

let t: TestServer;
let f: AppFixture;
let licenseId: string;
let ownId: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-relay-'));
const running: RelayProcess[] = [];

beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t);
  await f.owner.put(`/api/apps/${f.app.id}/entitlements`, { entitlements: [{ code: 'pro' }, { code: 'cad' }] });
  await f.keys(1, { level: 4, entitlements: ['pro', 'cad'], duration: 365, unit: 'days' });
  licenseId = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items[0].id;
  ownId = relayIdHere();
}, 120_000);
afterAll(async () => {
  for (const r of running) await r.stop('SIGKILL');
  await t.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const DAY = 86_400_000;

async function issue(body: Record<string, unknown>, api: Api = f.owner) {
  return api.post(`/api/licenses/${licenseId}/pools`, body);
}

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
}

async function relay(poolFile: string, data: string): Promise<RelayProcess> {
  const r = await spawnRelay(['--pool', poolFile, '--public-key', await publicKey(f.owner), '--data', data]);
  running.push(r);
  return r;
}

describe('POST /api/licenses/{id}/pools', () => {
  it('signs a kwpool1 pool under the published key with the key grant, the seats and the validity', async () => {
    const r = await issue({ seats: 25, valid_days: 30, relay_id: 'relay-a' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(Object.keys(r.body)).toEqual(['pool']);
    const p = await verifiedPayload(f.owner, r.body.pool, 'kwpool1');
    expect(Object.keys(p)).toEqual([
      'v',
      'kid',
      'app_id',
      'license_id',
      'relay_id',
      'seats',
      'level',
      'entitlements',
      'expires_at',
      'valid_until',
      'issued_at',
    ]);
    expect(p).toMatchObject({
      v: 1,
      app_id: f.app.id,
      license_id: licenseId,
      relay_id: 'relay-a',
      seats: 25,
      level: 4,
      entitlements: ['cad', 'pro'],
    });
    // An unused 365-day key: the pool ends where the key would if activated now; 30 days come first.
    expect(Date.parse(p.valid_until) - Date.parse(p.issued_at)).toBe(30 * DAY);
    expect(Math.abs(Date.parse(p.expires_at) - Date.now() - 365 * DAY)).toBeLessThan(120_000);
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.pool`);
    expect(JSON.stringify(logs.body)).toContain('relay-a');
  });

  it('bounds seats, valid_days and relay_id (422); owners, admins, developers and licenses:write only', async () => {
    for (const body of [
      { seats: 0, valid_days: 1, relay_id: 'x' },
      { seats: 10_001, valid_days: 1, relay_id: 'x' },
      { seats: 1, valid_days: 0, relay_id: 'x' },
      { seats: 1, valid_days: 3651, relay_id: 'x' },
      { seats: 1, valid_days: 1, relay_id: '' },
      { seats: 1, valid_days: 1, relay_id: 'x'.repeat(129) },
      { seats: 1, valid_days: 1 },
    ]) {
      const r = await issue(body);
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect((await issue({ seats: 10_000, valid_days: 3650, relay_id: 'x'.repeat(128) })).status).toBe(200);
    const seller = await f.owner.post('/api/team', {
      username: 'poolseller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { view_keys: true, generate_keys: true },
    });
    expect(seller.status).toBe(200);
    const sellerApi = await new Api(t.base).signIn('poolseller', 'seller-pass-1');
    expect((await issue({ seats: 1, valid_days: 1, relay_id: 'x' }, sellerApi)).status).toBe(403);
    const token = async (scopes: string[]) =>
      f.owner.as((await f.owner.post('/api/tokens', { name: `p${scopes.join()}`, scopes, app_ids: null })).body.token);
    expect((await issue({ seats: 1, valid_days: 1, relay_id: 'x' }, await token(['licenses:write']))).status).toBe(200);
    expect((await issue({ seats: 1, valid_days: 1, relay_id: 'x' }, await token(['licenses:read']))).status).toBe(403);
  });

  it("carries an activated key's expiry, and refuses a banned key as `license` does", async () => {
    const [key] = await f.keys(1, { duration: 3, unit: 'days' });
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: 'pool-activated-1' })).status).toBe(200);
    const row = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items.find(
      (k: { key_preview: string }) => k.key_preview === `${key!.slice(0, 4)}****${key!.slice(-4)}`,
    );
    const activated = await f.owner.post(`/api/licenses/${row.id}/pools`, { seats: 3, valid_days: 30, relay_id: 'x' });
    expect(activated.status, JSON.stringify(activated.body)).toBe(200);
    const p = await verifiedPayload(f.owner, activated.body.pool, 'kwpool1');
    // The key's expiry comes before issue + 30 days: the pool ends with the key.
    expect(p.expires_at).toBe(row.expires_at);
    expect(p.valid_until).toBe(row.expires_at);
    await f.owner.patch(`/api/licenses/${row.id}/ban`, { banned: true });
    const r = await f.owner.post(`/api/licenses/${row.id}/pools`, { seats: 1, valid_days: 1, relay_id: 'x' });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ detail: 'License key is banned' });
  });
});

describe('keywarden relay', () => {
  it('prints a stable relay id derived from the machine id', () => {
    expect(ownId).toMatch(/^[0-9a-f]{32}$/);
    expect(relayIdHere()).toBe(ownId);
    expect(ownId).not.toContain(fs.readFileSync('/etc/machine-id', 'utf8').trim());
  });

  it('refuses, with exit status 1 and a reason, a pool that does not verify, has expired, or names another relay', async () => {
    const key = await publicKey(f.owner);
    const good = (await issue({ seats: 2, valid_days: 1, relay_id: ownId })).body.pool as string;
    const [head, sig] = [good.slice(0, good.lastIndexOf('.')), good.slice(good.lastIndexOf('.') + 1)];
    const payload = JSON.parse(Buffer.from(head.split('.')[1]!, 'base64url').toString('utf8'));
    const tampered = `kwpool1.${Buffer.from(JSON.stringify({ ...payload, seats: 2000 })).toString('base64url')}.${sig}`;
    const otherKey = Buffer.alloc(32, 7).toString('base64');
    const secrets = t.server.services.secrets;
    const expired = signPool(secrets.signing.kid, secrets.signing.secretKey, {
      ...payload,
      valid_until: new Date(Date.now() - 60_000).toISOString(),
    });
    const foreign = (await issue({ seats: 2, valid_days: 1, relay_id: 'another-machine' })).body.pool as string;
    const cases: [string, string, RegExp][] = [
      [tampered, key, /does not verify/],
      [good, otherKey, /does not verify/],
      [expired, key, /expired at/],
      [foreign, key, /for relay another-machine.*this machine is relay/],
    ];
    for (const [pool, k, reason] of cases) {
      const r = relayRefusal(['--pool', file('refused.pool', pool), '--public-key', k, '--data', path.join(dir, 'no')]);
      expect(r.status, r.text).toBe(1);
      expect(r.text).toMatch(reason);
    }
  });

  it('leases seats by HWID, renews, releases, refuses past its seats, and keeps leases across restarts', async () => {
    const pool = (await issue({ seats: 2, valid_days: 10, relay_id: ownId })).body.pool as string;
    const poolFile = file('two.pool', pool);
    const data = path.join(dir, 'data');
    let r = await relay(poolFile, data);
    let api = new Api(r.base);
    expect((await api.get('/relay/v1/status')).body).toEqual({
      seats: 2,
      in_use: 0,
      valid_until: (await verifiedPayload(f.owner, pool, 'kwpool1')).valid_until,
      license_id: licenseId,
    });
    const t0 = Date.now();
    const a = await api.post('/relay/v1/leases', { hwid: 'WORKSTATION-A' });
    expect(a.status).toBe(201);
    expect(Object.keys(a.body)).toEqual(['lease_id', 'hwid', 'expires_at', 'pool']);
    expect(a.body).toMatchObject({ hwid: 'workstation-a', pool });
    const exp = Date.parse(a.body.expires_at);
    expect(exp - t0).toBeGreaterThanOrEqual(15 * 60_000 - 1000);
    expect(exp - Date.now()).toBeLessThanOrEqual(15 * 60_000);
    // One HWID holds one lease: asking again renews the same one.
    const again = await api.post('/relay/v1/leases', { hwid: 'workstation-a' });
    expect(again.status).toBe(201);
    expect(again.body.lease_id).toBe(a.body.lease_id);
    const b = await api.post('/relay/v1/leases', { hwid: 'workstation-b' });
    expect(b.status).toBe(201);
    const c = await api.post('/relay/v1/leases', { hwid: 'workstation-c' });
    expect(c.status).toBe(409);
    expect(c.body).toEqual({ detail: 'No seats available' });
    expect((await api.get('/relay/v1/status')).body.in_use).toBe(2);
    // Renewal.
    const renewed = await api.put(`/relay/v1/leases/${a.body.lease_id}`, {});
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ lease_id: a.body.lease_id, hwid: 'workstation-a', pool });
    expect(Date.parse(renewed.body.expires_at)).toBeGreaterThanOrEqual(exp);
    const unknown = await api.put('/relay/v1/leases/no-such-lease', {});
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ detail: 'Lease not found' });
    // Release frees the seat.
    expect((await api.delete(`/relay/v1/leases/${b.body.lease_id}`)).status).toBe(204);
    expect((await api.delete(`/relay/v1/leases/${b.body.lease_id}`)).body).toEqual({ detail: 'Lease not found' });
    const c2 = await api.post('/relay/v1/leases', { hwid: 'workstation-c' });
    expect(c2.status).toBe(201);
    // Bad input is the catalogue's 422, never a crash.
    expect((await api.post('/relay/v1/leases', { hwid: '' })).status).toBe(422);
    expect((await api.post('/relay/v1/leases', { hwid: 'x', seats: 5 })).status).toBe(422);
    expect((await api.post('/relay/v1/leases', ['x'])).body.detail[0].loc).toEqual(['body', 'hwid']);
    expect((await api.post('/relay/v1/leases', {}, { rawBody: '{' })).status).toBe(400);
    // The status page.
    const page = await fetch(`${r.base}/`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('2 / 2 seats in use');

    // A clean restart keeps the leases.
    expect(await r.stop()).toBe(0);
    r = await relay(poolFile, data);
    api = new Api(r.base);
    expect((await api.get('/relay/v1/status')).body.in_use).toBe(2);
    expect((await api.put(`/relay/v1/leases/${a.body.lease_id}`, {})).status).toBe(200);
    expect((await api.post('/relay/v1/leases', { hwid: 'workstation-d' })).status).toBe(409);
    // So does a kill right after a change (the journal is replayed).
    expect((await api.delete(`/relay/v1/leases/${c2.body.lease_id}`)).status).toBe(204);
    const d = await api.post('/relay/v1/leases', { hwid: 'workstation-d' });
    expect(d.status).toBe(201);
    await r.stop('SIGKILL');
    r = await relay(poolFile, data);
    api = new Api(r.base);
    expect((await api.put(`/relay/v1/leases/${d.body.lease_id}`, {})).status).toBe(200);
    expect((await api.put(`/relay/v1/leases/${c2.body.lease_id}`, {})).status).toBe(404);
    expect((await api.put(`/relay/v1/leases/${a.body.lease_id}`, {})).status).toBe(200);
    await r.stop();

    // Leases expire: one whose time passed while the relay was down is gone when it comes back.
    const snapshot = JSON.parse(fs.readFileSync(path.join(data, 'leases.json'), 'utf8'));
    snapshot.leases = snapshot.leases.map((l: [string, string, number]) =>
      l[0] === a.body.lease_id ? [l[0], l[1], Date.now() - 1000] : l,
    );
    fs.writeFileSync(path.join(data, 'leases.json'), JSON.stringify(snapshot));
    r = await relay(poolFile, data);
    api = new Api(r.base);
    expect((await api.get('/relay/v1/status')).body.in_use).toBe(1);
    expect((await api.put(`/relay/v1/leases/${a.body.lease_id}`, {})).body).toEqual({ detail: 'Lease not found' });
    expect((await api.post('/relay/v1/leases', { hwid: 'workstation-e' })).status).toBe(201);
    await r.stop();
  });
});
