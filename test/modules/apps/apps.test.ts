import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;

beforeAll(async () => {
  t = await startTestServer({ ALLOW_PRIVATE_WEBHOOKS: '0' });
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
});
afterAll(() => t.close());

describe('applications', () => {
  it('creates an app with docs/spec.md defaults and generated credentials', async () => {
    const r = await owner.post('/apps', { name: 'Alpha', description: 'first' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      name: 'Alpha',
      version: '1.0',
      description: 'first',
      enabled: true,
      disabled_message: '',
      keys_paused: false,
      hwid_lock: false,
      require_signature: false,
      injection_detection: true,
      require_heartbeat: false,
      force_update: false,
      update_url: '',
      update_message: '',
      force_encryption: false,
      hash_check: false,
      expected_binary_hash: '',
      webhook: '',
      key_costs: {},
      allowed_hashes: [],
      heartbeat_interval: 30,
      beat_interval: 30,
      max_devices: 1,
      trial_hours: 0,
      trial_level: 1,
      offline_days: 0,
      grace_hours: 0,
      stats: { keys: 0, users: 0 },
    });
    expect(r.body.api_key).toMatch(/^[0-9a-f]{32}$/);
    expect(r.body.api_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const me = await owner.get('/api/auth/me');
    expect(r.body.owner_id).toBe(me.body.account.id);
    const other = await owner.post('/api/apps', { name: 'Beta', version: '2.5' });
    expect(other.body.version).toBe('2.5');
    expect(other.body.api_key).not.toBe(r.body.api_key);
    expect(other.body.api_secret).not.toBe(r.body.api_secret);
  });

  it('lists and reads apps through /api paths', async () => {
    const created = await owner.post('/apps', { name: 'Listed' });
    const list = await owner.get('/api/apps');
    expect(list.status).toBe(200);
    expect(list.body.map((a: { id: string }) => a.id)).toContain(created.body.id);
    const one = await owner.get(`/api/apps/${created.body.id}`);
    expect(one.body).toMatchObject({ id: created.body.id, name: 'Listed', stats: { keys: 0, users: 0 } });
  });

  it('PATCH round-trips every setting, on both path forms', async () => {
    const app = (await owner.post('/apps', { name: 'Settings' })).body;
    const patch = {
      name: 'Renamed',
      description: 'd',
      version: '3.1',
      enabled: false,
      disabled_message: 'Closed for maintenance',
      keys_paused: true,
      hwid_lock: true,
      require_signature: true,
      injection_detection: false,
      require_heartbeat: true,
      force_update: true,
      update_url: 'https://example.com/dl',
      update_message: 'Please update',
      force_encryption: true,
      hash_check: true,
      expected_binary_hash: 'ABCDEF0123456789',
      webhook: '',
      key_costs: { 'days:30': 10, lifetime: 99, 'days:7': null },
      heartbeat_interval: 2,
    };
    const r = await owner.patch(`/apps/${app.id}`, patch);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      ...patch,
      expected_binary_hash: 'abcdef0123456789',
      key_costs: { 'days:30': 10, lifetime: 99 },
      beat_interval: 5,
    });
    const again = await owner.patch(`/api/apps/${app.id}`, { heartbeat_interval: 1000 });
    expect(again.body).toMatchObject({ heartbeat_interval: 1000, beat_interval: 300, name: 'Renamed' });
    expect((await owner.get(`/api/apps/${app.id}`)).body).toMatchObject({
      enabled: false,
      disabled_message: 'Closed for maintenance',
    });
  });

  it('rejects unknown fields, wrong types, out-of-range values and an empty patch with 422', async () => {
    const app = (await owner.post('/apps', { name: 'Strict' })).body;
    const cases: [unknown, (string | number)[]][] = [
      [{ api_secret: 'mine' }, ['body', 'api_secret']],
      [{ enabled: 'yes' }, ['body', 'enabled']],
      [{ heartbeat_interval: 0 }, ['body', 'heartbeat_interval']],
      [{ key_costs: { 'days:2': 1 } }, ['body', 'key_costs', 'days:2']],
      [{ key_costs: { 'days:30': -1 } }, ['body', 'key_costs', 'days:30']],
      [{ name: '' }, ['body', 'name']],
      [{ expected_binary_hash: 'not-hex!' }, ['body', 'expected_binary_hash']],
    ];
    for (const [body, loc] of cases) {
      const r = await owner.patch(`/apps/${app.id}`, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(
        r.body.detail.map((d: { loc: unknown }) => d.loc),
        JSON.stringify(body),
      ).toContainEqual(loc);
      for (const d of r.body.detail) expect(Object.keys(d).sort()).toEqual(['loc', 'msg', 'type']);
    }
    expect((await owner.patch(`/apps/${app.id}`, {})).status).toBe(422);
  });

  it('accepts only public https webhooks', async () => {
    const app = (await owner.post('/apps', { name: 'Hooks' })).body;
    for (const webhook of [
      'http://93.184.216.34/hook',
      'https://127.0.0.1/hook',
      'https://10.1.2.3/x',
      'https://[::1]/x',
      'not a url',
    ]) {
      const r = await owner.patch(`/apps/${app.id}`, { webhook });
      expect(r.status, webhook).toBe(422);
      expect(r.body.detail[0]).toMatchObject({ loc: ['body', 'webhook'], msg: 'Webhook must be a public https URL' });
    }
    const ok = await owner.patch(`/apps/${app.id}`, { webhook: 'https://93.184.216.34/hook' });
    expect(ok.status).toBe(200);
    expect((await owner.patch(`/apps/${app.id}`, { webhook: '' })).body.webhook).toBe('');
  });

  it('replaces allowed binary hashes, lower-cased and de-duplicated', async () => {
    const app = (await owner.post('/apps', { name: 'Hashes' })).body;
    const r = await owner.put(`/api/apps/${app.id}/hashes`, {
      hashes: ['AAAAAAAAAAAAAAAA', 'aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb'],
    });
    expect(r.body.allowed_hashes).toEqual(['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb']);
    expect((await owner.put(`/api/apps/${app.id}/hashes`, { hashes: ['zz'] })).status).toBe(422);
  });

  it('hides apps of another owner (404) and answers 404 for unknown or malformed ids', async () => {
    const app = (await owner.post('/apps', { name: 'Private' })).body;
    await createAccount(t, { username: 'rival', password: 'rival-pass-1' });
    const rival = await new Api(t.base).signIn('rival', 'rival-pass-1');
    expect((await rival.get('/api/apps')).body).toEqual([]);
    for (const call of [
      rival.get(`/api/apps/${app.id}`),
      rival.patch(`/apps/${app.id}`, { name: 'x' }),
      rival.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 }),
    ]) {
      const r = await call;
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ detail: 'Application not found' });
    }
    expect((await owner.get('/api/apps/00000000-0000-0000-0000-000000000000')).status).toBe(404);
    expect((await owner.get('/api/apps/not-a-uuid')).status).toBe(404);
  });

  it('resellers see their allowed apps without api_secret and cannot create or change apps', async () => {
    const app = (await owner.post('/apps', { name: 'Resold' })).body;
    const ownerId = (await owner.get('/api/auth/me')).body.account.id;
    const reseller = await createAccount(t, {
      username: 'seller1',
      password: 'seller-pass-1',
      role: 'reseller',
      parentId: ownerId,
      ownerId,
    });
    await t.server.app.domain.access.accounts.allowApp(reseller.id, app.id, new Date());
    const r = await new Api(t.base).signIn('seller1', 'seller-pass-1');
    const list = await r.get('/api/apps');
    expect(list.body.map((a: { id: string }) => a.id)).toEqual([app.id]);
    expect(list.body[0].api_secret).toBeUndefined();
    expect(list.body[0].api_key).toBe(app.api_key);
    expect((await r.post('/apps', { name: 'Mine' })).status).toBe(403);
    expect((await r.patch(`/apps/${app.id}`, { enabled: false })).status).toBe(403);
    expect((await r.post(`/apps/${app.id}/bans`, { type: 'ip', value: '1.2.3.4' })).status).toBe(403);
    // No generate_keys permission yet.
    expect((await r.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body).toEqual({
      detail: 'Permission denied',
    });
  });
});

describe('admins acting on one of several allowed apps (regression: the scope once replaced the id)', () => {
  it('reads, changes and deletes exactly the app named, and nothing outside the allowed list', async () => {
    const ownerId = (await owner.get('/api/auth/me')).body.account.id;
    const [a, b, c] = await Promise.all(
      [1, 2, 3].map(async (i) => (await owner.post('/apps', { name: `Scoped ${i}` })).body),
    );
    const adm = await createAccount(t, {
      username: 'scopeadmin',
      password: 'admin-pass-1',
      role: 'admin',
      parentId: ownerId,
      ownerId,
    });
    await t.server.app.domain.access.accounts.allowApp(adm.id, a.id, new Date());
    await t.server.app.domain.access.accounts.allowApp(adm.id, b.id, new Date());
    const api = await new Api(t.base).signIn('scopeadmin', 'admin-pass-1');
    expect((await api.get(`/api/apps/${b.id}`)).body.name).toBe('Scoped 2');
    expect((await api.get(`/api/apps/${c.id}`)).status).toBe(404);
    expect((await api.patch(`/apps/${b.id}`, { name: 'Renamed 2' })).body.name).toBe('Renamed 2');
    expect((await owner.get(`/api/apps/${a.id}`)).body.name).toBe('Scoped 1');
    expect((await api.delete(`/api/apps/${b.id}`)).body).toEqual({ success: true });
    expect((await owner.get(`/api/apps/${a.id}`)).status).toBe(200);
    expect((await owner.get(`/api/apps/${c.id}`)).status).toBe(200);
    expect((await api.delete(`/api/apps/${c.id}`)).status).toBe(404);
  });
});

describe('blacklist', () => {
  it('adds, lists and removes IP and HWID entries', async () => {
    const app = (await owner.post('/apps', { name: 'Bans' })).body;
    const ip = await owner.post(`/apps/${app.id}/bans`, { type: 'ip', value: '::ffff:203.0.113.5' });
    expect(ip.status).toBe(200);
    expect(ip.body).toMatchObject({ type: 'ip', value: '203.0.113.5', app_id: app.id });
    const hwid = await owner.post(`/api/apps/${app.id}/bans`, { type: 'hwid', value: 'ABCDEF-1234' });
    expect(hwid.body.value).toBe('abcdef-1234');
    const dup = await owner.post(`/apps/${app.id}/bans`, { type: 'hwid', value: 'abcdef-1234' });
    expect(dup.body.id).toBe(hwid.body.id);
    const list = await owner.get(`/api/apps/${app.id}/bans`);
    expect(list.body.map((b: { id: string }) => b.id).sort()).toEqual([ip.body.id, hwid.body.id].sort());
    expect(list.body[0]).toHaveProperty('created_by');

    expect((await owner.delete(`/bans/${ip.body.id}`)).body).toEqual({ success: true });
    const again = await owner.delete(`/api/bans/${ip.body.id}`);
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ detail: 'Blacklist entry not found' });
    expect((await owner.get(`/api/apps/${app.id}/bans`)).body).toHaveLength(1);
  });

  it('validates entries', async () => {
    const app = (await owner.post('/apps', { name: 'BadBans' })).body;
    expect((await owner.post(`/apps/${app.id}/bans`, { type: 'ip', value: '999.1.1.1' })).status).toBe(422);
    expect((await owner.post(`/apps/${app.id}/bans`, { type: 'mac', value: 'x' })).status).toBe(422);
    expect((await owner.post(`/apps/${app.id}/bans`, { type: 'hwid', value: '' })).status).toBe(422);
  });
});

describe('audit log', () => {
  it('records dashboard actions newest first, with filters', async () => {
    const app = (await owner.post('/apps', { name: 'Logged' })).body;
    await owner.patch(`/apps/${app.id}`, { keys_paused: true });
    await owner.post(`/apps/${app.id}/bans`, { type: 'ip', value: '198.51.100.1' });
    const logs = await owner.get(`/api/apps/${app.id}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.body.map((l: { action: string }) => l.action)).toEqual(['blacklist.add', 'app.update', 'app.create']);
    expect(logs.body[0]).toMatchObject({ level: 'info', detail: 'ip 198.51.100.1 blacklisted' });
    const filtered = await owner.get(`/api/apps/${app.id}/logs?action=app.update&limit=5`);
    expect(filtered.body.map((l: { action: string }) => l.action)).toEqual(['app.update']);
    const before = await owner.get(`/api/apps/${app.id}/logs?before=${logs.body[0].id}`);
    expect(before.body).toHaveLength(2);
    expect((await owner.get(`/api/apps/${app.id}/logs?limit=0`)).status).toBe(422);
  });
});
