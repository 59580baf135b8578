// docs/protocol.md 12 against a real server: devices per key and per user (with the exact limit under a
// race), entitlements, trials (once per HWID, even racing), offline license files (verified as the
// SDK vectors verify them), grace on activation and heartbeat answers (REST and the channel), and
// PATCH /api/licenses/{id} (docs/protocol.md 15.2).
import { createPublicKey, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid as rawHwid } from '../../helpers/client.js';
import { openChannel } from '../../helpers/channel-client.js';
import { Subscriber } from '../../helpers/live-subscriber.js';
import { pinKeys } from '../../../sdk/typescript/src/verify.js';
import { verifyLicenseFile } from '../../../sdk/typescript/src/offline.js';
import { visible } from '../../../src/modules/access/visibility.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

const HOUR = 3_600_000;
/** HWIDs as the server stores them (lower-cased). */
const hwid = (n: string) => rawHwid(n).toLowerCase();

/** license from a fresh client (own IP, own rate-limit budget) and session. */
async function activate(f: AppFixture, key: string, device: string) {
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/license', { session, license: key, hwid: device });
  return { c, session, r };
}

async function keyRow(f: AppFixture, key: string) {
  const r = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=1000`);
  expect(r.status).toBe(200);
  return r.body.items.find((k: { key_preview: string }) => k.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`);
}

describe('application fields (docs/protocol.md 12.7)', () => {
  it('appear in GET /api/apps/{id} at their defaults, are patchable, and are bounded with a 422', async () => {
    const f = await appFixture(t);
    const got = await f.owner.get(`/api/apps/${f.app.id}`);
    expect(got.body).toMatchObject({ max_devices: 1, trial_hours: 0, trial_level: 1, offline_days: 0, grace_hours: 0 });
    const set = { max_devices: 5, trial_hours: 48, trial_level: 3, offline_days: 30, grace_hours: 12 };
    const r = await f.owner.patch(`/apps/${f.app.id}`, set);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject(set);
    for (const [field, value] of [
      ['max_devices', 0],
      ['max_devices', 1001],
      ['trial_hours', 8761],
      ['trial_hours', -1],
      ['trial_level', 0],
      ['offline_days', 3651],
      ['grace_hours', 721],
      ['grace_hours', 'x'],
    ] as const) {
      const bad = await f.owner.patch(`/apps/${f.app.id}`, { [field]: value });
      expect(bad.status, `${field}=${value}`).toBe(422);
      expect(bad.body.detail[0].loc).toEqual(['body', field]);
    }
    const doc = await f.owner.get('/api/openapi.json');
    expect(JSON.stringify(doc.body)).toContain('grace_hours');
    expect(doc.body.paths['/api/client/trial']).toBeDefined();
    expect(doc.body.paths['/api/apps/{id}/entitlements']).toBeDefined();
  });
});

describe('devices per license (docs/protocol.md 12.1)', () => {
  it('with hwid_lock, a key holds up to max_devices HWIDs; removing one frees its place; reset clears all', async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 3 });
    const [key] = await f.keys(1);
    const sub = await Subscriber.open(t.base, f.owner.token);
    await sub.subscribe(f.app.id);
    for (const n of [1, 2, 3]) expect((await activate(f, key!, hwid(`D${n}`))).r.status).toBe(200);
    // A held device comes back; a fourth is refused as docs/spec.md's HWID mismatch.
    expect((await activate(f, key!, hwid('D2').toUpperCase())).r.status).toBe(200);
    const fourth = await activate(f, key!, hwid('D4'));
    expect(fourth.r.status).toBe(403);
    expect(fourth.r.body).toEqual({ detail: 'HWID mismatch. Key locked to another device.' });
    const row = await keyRow(f, key!);
    expect(row.devices.map((d: { hwid: string }) => d.hwid)).toEqual([hwid('D1'), hwid('D2'), hwid('D3')]);
    expect(row.hwid).toBe(hwid('D1'));
    for (const d of row.devices) {
      expect(Date.parse(d.first_seen)).toBeLessThanOrEqual(Date.parse(d.last_seen));
      expect(d.last_seen).toMatch(/Z$/);
    }
    // Each device after the activation's first is announced (live event device.add) with its HWID.
    const added = await sub.nth((x) => x.type === 'event' && x.event.kind === 'device.add', 2);
    expect(added.event.data).toMatchObject({ license_id: row.id });
    sub.close();

    const gone = await f.owner.delete(`/api/licenses/${row.id}/devices/${hwid('D2')}`);
    expect(gone.status).toBe(200);
    expect((await f.owner.delete(`/api/licenses/${row.id}/devices/${hwid('D2')}`)).body).toEqual({
      detail: 'Device not found',
    });
    expect((await activate(f, key!, hwid('D4'))).r.status).toBe(200);
    expect((await activate(f, key!, hwid('D5'))).r.status).toBe(403);
    // The key's own limit overrides the app's.
    expect((await f.owner.patch(`/api/licenses/${row.id}`, { max_devices: 4 })).status).toBe(200);
    expect((await activate(f, key!, hwid('D5'))).r.status).toBe(200);
    expect((await f.owner.post(`/api/licenses/${row.id}/reset-hwid`)).status).toBe(200);
    const reset = await keyRow(f, key!);
    expect(reset.devices).toEqual([]);
    expect(reset.hwid).toBe('');
    expect((await activate(f, key!, hwid('D9'))).r.status).toBe(200);
    expect((await keyRow(f, key!)).devices.map((d: { hwid: string }) => d.hwid)).toEqual([hwid('D9')]);
  });

  it('without hwid_lock every HWID is recorded and none is refused; at the defaults docs/spec.md pins one HWID', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    for (const n of [1, 2, 3]) expect((await activate(f, key!, hwid(`F${n}`))).r.status).toBe(200);
    expect((await keyRow(f, key!)).devices).toHaveLength(3);
    const locked = await appFixture(t, { hwid_lock: true });
    const [k2] = await locked.keys(1);
    expect((await activate(locked, k2!, hwid('G1'))).r.status).toBe(200);
    expect((await activate(locked, k2!, hwid('G2'))).r.status).toBe(403);
  });

  it('20 concurrent activations from new HWIDs against a limit of 3: exactly 3 are accepted', async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 3 });
    const [key] = await f.keys(1);
    const clients = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const c = f.client();
        return { c, session: await f.session(c) };
      }),
    );
    const answers = await Promise.all(
      clients.map(({ c, session }, i) =>
        c.post('/api/client/license', { session, license: key, hwid: hwid(`RACE${i}`) }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s !== 200).every((s) => s === 403 || s === 409)).toBe(true);
    const rows = await f.sql(
      'select count(*)::int as n from key_devices d join license_keys k on k.id = d.license_id where k.app_id = $1 and d.bound',
      [f.app.id],
    );
    expect(rows[0].n).toBe(3);
  });

  it("an end user's devices: limit from its key, listed on the user row, removable one by one", async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 2 });
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    const reg = await c.post('/api/client/register', {
      session,
      username: 'dora',
      password: 'pw-dora-1',
      license: key,
      hwid: hwid('U1'),
    });
    expect(reg.status).toBe(200);
    const login = async (device: string) => {
      const lc = f.client();
      return lc.post('/api/client/login', {
        session: await f.session(lc),
        username: 'dora',
        password: 'pw-dora-1',
        hwid: device,
      });
    };
    expect((await login(hwid('U2'))).status).toBe(200);
    expect((await login(hwid('U1'))).status).toBe(200);
    const third = await login(hwid('U3'));
    expect(third.status).toBe(401);
    expect(third.body).toEqual({ detail: 'Invalid username or password' });
    const [user] = (await f.owner.get(`/api/apps/${f.app.id}/users`)).body;
    expect(user.devices.map((d: { hwid: string }) => d.hwid)).toEqual([hwid('U1'), hwid('U2')]);
    // The key row of a registered key shows its user's devices.
    expect((await keyRow(f, key!)).devices).toHaveLength(2);
    expect((await f.owner.delete(`/api/users/${user.id}/devices/${hwid('U1')}`)).status).toBe(200);
    expect((await f.owner.delete(`/api/users/${user.id}/devices/${hwid('U1')}`)).status).toBe(404);
    expect((await login(hwid('U3'))).status).toBe(200);
    expect((await f.owner.post(`/api/users/${user.id}/reset-hwid`)).status).toBe(200);
    expect((await f.owner.get(`/api/apps/${f.app.id}/users`)).body[0].devices).toEqual([]);
  });

  it('devices are hidden with hwid by the one visibility rule (every channel goes through it)', () => {
    const row = { id: 'k', hwid: 'h', devices: [{ hwid: 'h', first_seen: 'a', last_seen: 'b' }] };
    expect(visible({ hwid: false, ip: true }, row)).toEqual({ id: 'k' });
    expect(visible({ hwid: true, ip: false }, row)).toEqual(row);
  });
});

describe('entitlements (docs/protocol.md 12.3)', () => {
  it('catalogue, codes on keys (generation, PATCH), sorted in answers; a removed code leaves every key', async () => {
    const f = await appFixture(t);
    const put = await f.owner.put(`/api/apps/${f.app.id}/entitlements`, {
      entitlements: [
        { code: 'pro', name: 'Pro' },
        { code: 'export', name: 'Export' },
        { code: 'beta.1', name: 'Beta' },
      ],
    });
    expect(put.status).toBe(200);
    expect((await f.owner.get(`/api/apps/${f.app.id}/entitlements`)).body.entitlements.map((e: any) => e.code)).toEqual(
      ['pro', 'export', 'beta.1'],
    );
    for (const bad of [
      { entitlements: [{ code: 'Upper' }] },
      { entitlements: [{ code: '' }] },
      { entitlements: [{ code: 'a'.repeat(65) }] },
      { entitlements: [{ code: 'dup' }, { code: 'dup' }] },
      { entitlements: Array.from({ length: 101 }, (_, i) => ({ code: `c${i}` })) },
      { entitlements: [{ code: 'x', extra: 1 }] },
    ]) {
      const r = await f.owner.put(`/api/apps/${f.app.id}/entitlements`, bad);
      expect(r.status, JSON.stringify(bad).slice(0, 80)).toBe(422);
    }
    const unknown = await f.owner.post(`/apps/${f.app.id}/licenses`, {
      amount: 1,
      duration: 1,
      unit: 'days',
      entitlements: ['nope'],
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].loc).toEqual(['body', 'entitlements', 0]);
    const [key] = await f.keys(1, { entitlements: ['pro', 'export'] });
    const { r } = await activate(f, key!, hwid('E1'));
    expect(r.body.entitlements).toEqual(['export', 'pro']);
    const row = await keyRow(f, key!);
    expect(row.entitlements).toEqual(['export', 'pro']);
    const patched = await f.owner.patch(`/api/licenses/${row.id}`, { entitlements: ['beta.1', 'pro'] });
    expect(patched.status).toBe(200);
    expect(patched.body.entitlements).toEqual(['beta.1', 'pro']);
    expect((await f.owner.patch(`/api/licenses/${row.id}`, { entitlements: ['gone'] })).status).toBe(422);
    // Removing `pro` from the catalogue takes it off the key.
    await f.owner.put(`/api/apps/${f.app.id}/entitlements`, { entitlements: [{ code: 'beta.1', name: 'Beta' }] });
    expect((await keyRow(f, key!)).entitlements).toEqual(['beta.1']);
    expect((await activate(f, key!, hwid('E1'))).r.body.entitlements).toEqual(['beta.1']);
    // register and login carry them too.
    const [k2] = await f.keys(1, { entitlements: ['beta.1'] });
    const c = f.client();
    const session = await f.session(c);
    const reg = await c.post('/api/client/register', {
      session,
      username: 'ent',
      password: 'pw-ent-1',
      license: k2,
      hwid: hwid('E2'),
    });
    expect(reg.body.entitlements).toEqual(['beta.1']);
    const login = await c.post('/api/client/login', {
      session,
      username: 'ent',
      password: 'pw-ent-1',
      hwid: hwid('E2'),
    });
    expect(login.body.entitlements).toEqual(['beta.1']);
  });
});

describe('PATCH /api/licenses/{id} (docs/protocol.md 15.2)', () => {
  it('changes level and note, is audited as license.update, and refuses unknown or out-of-range fields', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { level: 2 });
    const row = await keyRow(f, key!);
    const r = await f.owner.patch(`/api/licenses/${row.id}`, { level: 7, note: 'vip' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ level: 7, note: 'vip' });
    expect((await activate(f, key!, hwid('P1'))).r.body.level).toBe(7);
    for (const bad of [{}, { level: 0 }, { max_devices: 0 }, { max_devices: 1001 }, { max_sessions: -1 }, { x: 1 }])
      expect((await f.owner.patch(`/api/licenses/${row.id}`, bad)).status, JSON.stringify(bad)).toBe(422);
    expect((await f.owner.patch(`/api/licenses/${row.id}`, { max_devices: null })).body.max_devices).toBeNull();
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.update`);
    expect(logs.body.items ?? logs.body).toEqual(
      expect.arrayContaining([expect.objectContaining({ action: 'license.update' })]),
    );
    expect((await f.owner.patch('/api/licenses/00000000-0000-4000-8000-000000000000', { level: 2 })).status).toBe(404);
  });
});

describe('trials (docs/protocol.md 12.4)', () => {
  it('off by default; once per HWID and application, even after the trial key is deleted', async () => {
    const off = await appFixture(t);
    const oc = off.client();
    const os = await off.session(oc);
    const refused = await oc.post('/api/client/trial', { session: os, hwid: hwid('T0') });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ detail: 'Trials are not enabled for this application.' });

    const f = await appFixture(t, { trial_hours: 30, trial_level: 4, grace_hours: 1 });
    const c = f.client();
    const session = await f.session(c);
    const before = Date.now();
    const r = await c.post('/api/client/trial', { session, hwid: hwid('T1').toUpperCase() });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, level: 4, entitlements: [] });
    expect(r.body.key).toMatch(/^TRIAL-[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    const expires = Date.parse(r.body.expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 30 * HOUR - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * HOUR);
    expect(Date.parse(r.body.grace_until)).toBeLessThanOrEqual(Date.now() + HOUR);
    // The session is activated: heartbeat/start works.
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: 'system-0001' })).status).toBe(200);
    const row = await keyRow(f, r.body.key);
    expect(row).toMatchObject({ note: 'trial', status: 'used', used_by: 'license-only', level: 4, duration_days: 2 });
    expect(row.hwid).toBe(hwid('T1'));
    // The key works as a license on its machine.
    expect((await activate(f, r.body.key, hwid('T1'))).r.status).toBe(200);
    const again = async () => {
      const c2 = f.client();
      return c2.post('/api/client/trial', { session: await f.session(c2), hwid: hwid('T1') });
    };
    expect((await again()).body).toEqual({ detail: 'Trial already used on this device.' });
    expect((await f.owner.delete(`/api/licenses/${row.id}`)).status).toBe(200);
    expect((await again()).status).toBe(403);
    const trials = await f.owner.get(`/api/apps/${f.app.id}/licenses?q=trial`);
    expect(trials.body.items).toEqual([]);
  });

  it('concurrent trial calls for one HWID: exactly one 200', async () => {
    const f = await appFixture(t, { trial_hours: 2 });
    const calls = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const c = f.client();
        const session = await f.session(c);
        return c.post('/api/client/trial', { session, hwid: hwid('RACE-TRIAL') });
      }),
    );
    expect(calls.filter((r) => r.status === 200)).toHaveLength(1);
    expect(calls.filter((r) => r.status === 403)).toHaveLength(7);
    expect((await f.sql('select count(*)::int as n from license_keys where app_id = $1', [f.app.id]))[0].n).toBe(1);
  });
});

describe('offline license files (docs/protocol.md 12.5)', () => {
  async function pinned() {
    const keys = (await f0().get('/api/client/keys')).body.keys as { kid: string; public_key: string }[];
    return pinKeys(keys.map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: k.public_key }) as never));
  }
  let owner: AppFixture['owner'];
  const f0 = () => owner;

  it('issued after an activation, signed with the response key, in the vectors format; refusals', async () => {
    const off = await appFixture(t);
    owner = off.owner;
    const [okey] = await off.keys(1);
    const o = await activate(off, okey!, hwid('O0'));
    const disabled = await o.c.post('/api/client/offline', { session: o.session, hwid: hwid('O0') });
    expect(disabled.body).toEqual({ detail: 'Offline licenses are not enabled for this application.' });

    const f = await appFixture(t, { offline_days: 7, hwid_lock: true });
    await f.owner.put(`/api/apps/${f.app.id}/entitlements`, { entitlements: [{ code: 'pro' }, { code: 'export' }] });
    const [key] = await f.keys(1, { level: 3, entitlements: ['pro', 'export'] });
    const c = f.client();
    const session = await f.session(c);
    const early = await c.post('/api/client/offline', { session, hwid: hwid('O1') });
    expect(early.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
    const lic = await c.post('/api/client/license', { session, license: key, hwid: hwid('O1') });
    expect(lic.status).toBe(200);
    const other = await c.post('/api/client/offline', { session, hwid: hwid('O2') });
    expect(other.body).toEqual({ detail: 'HWID mismatch. Key locked to another device.' });
    const now = Date.now();
    const r = await c.post('/api/client/offline', { session, hwid: hwid('O1') });
    expect(r.status).toBe(200);
    const file: string = r.body.license_file;
    const [tag, payloadB64, sigB64] = file.split('.') as [string, string, string];
    expect(tag).toBe('kwlic1');
    expect(payloadB64).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(sigB64).toMatch(/^[A-Za-z0-9_-]+$/);
    const payload = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8'));
    const row = await keyRow(f, key!);
    expect(Object.keys(payload)).toEqual([
      'v',
      'kid',
      'app_id',
      'license_id',
      'user',
      'hwid',
      'level',
      'entitlements',
      'expires_at',
      'issued_at',
      'valid_until',
    ]);
    expect(payload).toMatchObject({
      v: 1,
      app_id: f.app.id,
      license_id: row.id,
      user: null,
      hwid: hwid('O1'),
      level: 3,
      entitlements: ['export', 'pro'],
      expires_at: row.expires_at,
    });
    expect(Date.parse(payload.valid_until) - Date.parse(payload.issued_at)).toBe(7 * 24 * HOUR);
    expect(Math.abs(Date.parse(payload.issued_at) - now)).toBeLessThan(60_000);
    // The signature, by the published key the payload names (as every SDK checks it).
    const published = (await f.owner.get('/api/client/keys')).body.keys as { kid: string; public_key: string }[];
    const pub = published.find((k) => k.kid === payload.kid)!;
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(pub.public_key, 'base64')]);
    const publicKey = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    expect(
      verify(null, Buffer.from(`kwlic1.${payloadB64}`, 'ascii'), publicKey, Buffer.from(sigB64, 'base64url')),
    ).toBe(true);
    // And the TypeScript SDK's verifier (the vectors' logic) accepts it.
    owner = f.owner;
    const checked = verifyLicenseFile(file, await pinned(), f.app.id, hwid('O1'), Date.now(), undefined);
    expect(checked.entitlements).toEqual(['export', 'pro']);

    // Never for a banned key.
    expect((await f.owner.patch(`/api/licenses/${row.id}/ban`, { banned: true })).status).toBe(200);
    const banned = await c.post('/api/client/offline', { session, hwid: hwid('O1') });
    expect(banned.status).toBe(403);
    expect(banned.body).toEqual({ detail: 'License key is banned' });
    expect((await f.owner.post(`/api/licenses/${row.id}/offline`, { hwid: hwid('O1') })).status).toBe(403);
  });

  it('never for an expired or deleted key', async () => {
    const f = await appFixture(t, { offline_days: 7 });
    const [key] = await f.keys(1);
    const a = await activate(f, key!, hwid('X1'));
    const row = await keyRow(f, key!);
    await f.sql(`update license_keys set expires_at = now() - interval '1 minute' where id = $1`, [row.id]);
    const expired = await a.c.post('/api/client/offline', { session: a.session, hwid: hwid('X1') });
    expect(expired.body).toEqual({ detail: 'License expired' });
    expect((await f.owner.post(`/api/licenses/${row.id}/offline`, { hwid: hwid('X1') })).body).toEqual({
      detail: 'License expired',
    });
    expect((await f.owner.delete(`/api/licenses/${row.id}`)).status).toBe(200);
    const deleted = await a.c.post('/api/client/offline', { session: a.session, hwid: hwid('X1') });
    expect(deleted.body).toEqual({ detail: 'Invalid license key' });
  });

  it('the dashboard issues one for an air-gapped machine, binding an unused key like a license-only activation', async () => {
    const f = await appFixture(t, { offline_days: 30, hwid_lock: true });
    const [key] = await f.keys(1, { duration: 10, unit: 'days' });
    const row = await keyRow(f, key!);
    const sub = await Subscriber.open(t.base, f.owner.token);
    await sub.subscribe(f.app.id);
    const r = await f.owner.post(`/api/licenses/${row.id}/offline`, { hwid: hwid('AIR1') });
    expect(r.status).toBe(200);
    const payload = JSON.parse(Buffer.from(r.body.license_file.split('.')[1], 'base64url').toString('utf8'));
    const after = await keyRow(f, key!);
    expect(after).toMatchObject({ status: 'used', used_by: 'license-only', hwid: hwid('AIR1') });
    expect(payload.expires_at).toBe(after.expires_at);
    // valid_until is the expiry when that comes before issued_at + offline_days.
    expect(payload.valid_until).toBe(after.expires_at);
    expect(after.devices.map((d: { hwid: string }) => d.hwid)).toEqual([hwid('AIR1')]);
    // Another machine: the key holds its one device already.
    const other = await f.owner.post(`/api/licenses/${row.id}/offline`, { hwid: hwid('AIR2') });
    expect(other.body).toEqual({ detail: 'HWID mismatch. Key locked to another device.' });
    expect((await f.owner.post(`/api/licenses/${row.id}/offline`, { hwid: 'short' })).status).toBe(422);
    await sub.next((x) => x.type === 'event' && x.event.kind === 'license.offline');
    sub.close();
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.offline`);
    expect(JSON.stringify(logs.body)).toContain('license.offline');
  });
});

describe('grace (docs/protocol.md 12.6)', () => {
  it('absent at grace_hours 0; now + grace_hours or the expiry when earlier, on REST and channel beats', async () => {
    const none = await appFixture(t);
    const [k0] = await none.keys(1);
    expect((await activate(none, k0!, hwid('N1'))).r.body).not.toHaveProperty('grace_until');

    const f = await appFixture(t, { grace_hours: 2, heartbeat_interval: 5 });
    const [long] = await f.keys(1, { duration: 30, unit: 'days' });
    const before = Date.now();
    const a = await activate(f, long!, hwid('G1'));
    const g = Date.parse(a.r.body.grace_until);
    expect(g).toBeGreaterThanOrEqual(before + 2 * HOUR - 1000);
    expect(g).toBeLessThanOrEqual(Date.now() + 2 * HOUR);
    const [short] = await f.keys(1, { duration: 1, unit: 'hours' });
    const s = await activate(f, short!, hwid('G2'));
    expect(s.r.body.grace_until).toBe(s.r.body.expires_at);

    // REST heartbeat: start and an accepted beat.
    const start = await a.c.post('/api/client/heartbeat/start', { session: a.session, system_id: 'system-0001' });
    expect(Date.parse(start.body.grace_until)).toBeGreaterThan(before);
    const beat = await a.c.post('/api/client/heartbeat', {
      session: a.session,
      token: start.body.token,
      system_id: 'system-0001',
      beat_index: 1,
      code_hash: 'c0de'.repeat(8),
    });
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.body.grace_until)).toBeGreaterThanOrEqual(Date.parse(start.body.grace_until));

    // The realtime channel carries the same answers.
    const [k3] = await f.keys(1);
    const w = await activate(f, k3!, hwid('G3'));
    const ch = await openChannel(t.base, w.session, { ip: w.c.extraHeaders['x-forwarded-for'] });
    const wstart = await ch.call('heartbeat/start', { system_id: 'system-0003' });
    expect(wstart.status).toBe(200);
    expect(wstart.body.grace_until).toMatch(/Z$/);
    const wbeat = await ch.call('heartbeat', {
      token: wstart.body.token,
      system_id: 'system-0003',
      beat_index: 1,
      code_hash: 'c0de'.repeat(8),
    });
    expect(wbeat.status).toBe(200);
    expect(Date.parse(wbeat.body.grace_until)).toBeGreaterThan(Date.now() + HOUR);
    ch.close();
  });
});
