// docs/spec.md "Dashboard: team" rules 1-8 and docs/protocol.md 7 / 11.7 / 11.8 / 11.11.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;
let ownerId: string;
let appA: string;
let appB: string;
let seq = 0;

beforeAll(async () => {
  t = await startTestServer({ DEVELOPER_EMAILS: 'dev@kw.test', ALLOW_PRIVATE_WEBHOOKS: '0' });
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  ownerId = (await owner.get('/api/auth/me')).body.account.id;
  appA = (await owner.post('/apps', { name: 'A' })).body.id;
  appB = (await owner.post('/apps', { name: 'B' })).body.id;
});
afterAll(() => t.close());

async function member(as: Api, body: Record<string, unknown> = {}) {
  const username = `member${++seq}`;
  const r = await as.post('/api/team', { username, password: 'member-pass-1', ...body });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  return { ...r.body, api: () => new Api(t.base).signIn(username, 'member-pass-1') } as {
    id: string;
    username: string;
    api: () => Promise<Api>;
    [k: string]: any;
  };
}

describe('team', () => {
  it('creates resellers by default with permissions, quota and notes; 0 quota is unlimited', async () => {
    const r = await member(owner, { allowed_apps: [appA], key_quota: 0, notes: 'n', permissions: { view_keys: true } });
    expect(r).toMatchObject({
      role: 'reseller',
      parent_id: ownerId,
      owner_id: ownerId,
      allowed_apps: [appA],
      key_quota: null,
      credits: null,
      notes: 'n',
      enabled: true,
    });
    expect(r.permissions).toMatchObject({ view_keys: true, generate_keys: false });
    const list = (await owner.get('/api/team')).body.map((m: { id: string }) => m.id);
    expect(list).toContain(r.id);
  });

  it('validates username, password policy, notes length and unknown fields', async () => {
    for (const body of [
      { username: 'ab', password: 'member-pass-1' },
      { username: 'bad name', password: 'member-pass-1' },
      { username: 'okname', password: 'short1' },
      { username: 'okname', password: 'onlyletters' },
      { username: 'okname', password: 'member-pass-1', notes: 'x'.repeat(501) },
      { username: 'okname', password: 'member-pass-1', bogus: 1 },
    ]) {
      expect((await owner.post('/api/team', body)).status, JSON.stringify(body)).toBe(422);
    }
    await member(owner, { username: 'dupname' });
    expect((await owner.post('/api/team', { username: 'dupname', password: 'member-pass-1' })).status).toBe(409);
  });

  it('rejects reserved developer emails on create and update; lowercases and de-duplicates emails', async () => {
    const r = await owner.post('/api/team', { username: 'mailer', password: 'member-pass-1', email: 'DEV@kw.test' });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ detail: 'Email address is reserved' });
    const m = await member(owner, { email: 'Some.One@Example.com' });
    expect(m.email).toBe('some.one@example.com');
    expect((await owner.patch(`/api/team/${m.id}`, { email: 'dev@kw.test' })).body).toEqual({
      detail: 'Email address is reserved',
    });
    expect(
      (await owner.post('/api/team', { username: 'mailer2', password: 'member-pass-1', email: 'SOME.one@example.com' }))
        .status,
    ).toBe(409);
  });

  it("rule 8: assigning an app the caller cannot assign is 403; another owner's app is 404", async () => {
    await createAccount(t, { username: 'otherowner', password: 'other-pass-1' });
    const other = await new Api(t.base).signIn('otherowner', 'other-pass-1');
    const foreign = (await other.post('/apps', { name: 'Foreign' })).body.id;
    // docs/protocol.md 11.36: an app of another tree does not exist for this one.
    const grab = await owner.post('/api/team', {
      username: 'grabber',
      password: 'member-pass-1',
      allowed_apps: [foreign],
    });
    expect([grab.status, grab.body]).toEqual([404, { detail: 'Application not found' }]);
    const admin = await member(owner, { role: 'admin', allowed_apps: [appA] });
    const adminApi = await admin.api();
    expect(
      (await adminApi.post('/api/team', { username: 'sub1', password: 'member-pass-1', allowed_apps: [appB] })).status,
    ).toBe(403);
    expect(
      (await adminApi.post('/api/team', { username: 'sub2', password: 'member-pass-1', allowed_apps: [appA] })).status,
    ).toBe(200);
  });

  it('admins create only resellers and act only within their subtree; only the owner promotes', async () => {
    const admin = await member(owner, { role: 'admin' });
    const adminApi = await admin.api();
    expect(
      (await adminApi.post('/api/team', { username: 'wannabe', password: 'member-pass-1', role: 'admin' })).status,
    ).toBe(403);
    const mine = await member(adminApi);
    expect(mine.parent_id).toBe(admin.id);
    const notMine = await member(owner);
    expect((await adminApi.patch(`/api/team/${notMine.id}`, { enabled: false })).status).toBe(403);
    expect((await adminApi.patch(`/api/team/${mine.id}`, { role: 'admin' })).status).toBe(403);
    expect((await adminApi.get('/api/team')).body.map((m: { id: string }) => m.id)).toEqual([mine.id]);
    const promoted = await owner.patch(`/api/team/${mine.id}`, { role: 'admin' });
    expect(promoted.body.role).toBe('admin');
    const other = await member(owner, { role: 'admin' });
    expect((await adminApi.patch(`/api/team/${other.id}`, { enabled: false })).status).toBe(403); // a peer admin
  });

  it('rules 4, 5 and 11.11: self-edit is checked before owner protection; owners cannot be modified', async () => {
    const self = await owner.patch(`/api/team/${ownerId}`, { enabled: false });
    expect(self.status).toBe(403);
    expect(self.body).toEqual({
      detail: 'Cannot manage your own account here. Change your own password from Settings instead.',
    });
    const admin = await member(owner, { role: 'admin' });
    const adminApi = await admin.api();
    for (const call of [
      adminApi.patch(`/api/team/${ownerId}`, { enabled: false }),
      adminApi.delete(`/api/team/${ownerId}`),
      adminApi.post(`/api/team/${ownerId}/password`, { password: 'new-pass-123' }),
    ]) {
      const r = await call;
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ detail: 'The owner account cannot be modified.' });
    }
  });

  it('another owner is invisible (404) and sees none of this tree', async () => {
    const m = await member(owner);
    await createAccount(t, { username: 'rival2', password: 'rival-pass-1' });
    const rival = await new Api(t.base).signIn('rival2', 'rival-pass-1');
    expect((await rival.get('/api/team')).body).toEqual([]);
    expect((await rival.patch(`/api/team/${m.id}`, { enabled: false })).status).toBe(404);
  });

  it('revokes every session of the target on role, enabled, apps, email or password changes', async () => {
    const changes: [string, (id: string) => Promise<unknown>][] = [
      ['enabled', (id) => owner.patch(`/api/team/${id}`, { enabled: true })],
      ['email', (id) => owner.patch(`/api/team/${id}`, { email: `x${id.slice(0, 6)}@example.com` })],
      ['apps', (id) => owner.patch(`/api/team/${id}/apps`, [appA])],
      ['password', (id) => owner.post(`/api/team/${id}/password`, { password: 'fresh-pass-123' })],
      ['role', (id) => owner.patch(`/api/team/${id}`, { role: 'admin' })],
    ];
    for (const [name, change] of changes) {
      const m = await member(owner);
      const session = await m.api();
      expect((await session.get('/api/auth/me')).status).toBe(200);
      await change(m.id);
      expect((await session.get('/api/auth/me')).status, name).toBe(401);
    }
  });

  it('disabled members cannot sign in', async () => {
    const m = await member(owner);
    await owner.patch(`/api/team/${m.id}`, { enabled: false });
    expect(
      (await owner.post('/api/auth/login', { username: m.username, password: 'member-pass-1' }, { token: '' })).status,
    ).toBe(401);
  });

  it('delete re-parents children to the caller and reports adopted_children', async () => {
    const admin = await member(owner, { role: 'admin' });
    const adminApi = await admin.api();
    const c1 = await member(adminApi);
    await member(adminApi);
    const r = await owner.delete(`/api/team/${admin.id}`);
    expect(r.body).toEqual({ success: true, adopted_children: 2 });
    const list = (await owner.get('/api/team')).body as { id: string; parent_id: string }[];
    expect(list.find((m) => m.id === c1.id)?.parent_id).toBe(ownerId);
    expect(list.some((m) => m.id === admin.id)).toBe(false);
  });

  it('permissions replace the matrix: omitted keys become false, unknown keys are 422', async () => {
    const m = await member(owner, { permissions: { view_keys: true, view_ip: true } });
    const r = await owner.patch(`/api/team/${m.id}/permissions`, { permissions: { generate_keys: true } });
    expect(r.body.permissions).toMatchObject({ view_keys: false, view_ip: false, generate_keys: true });
    expect((await owner.patch(`/api/team/${m.id}/permissions`, { permissions: { fly: true } })).status).toBe(422);
  });

  it('apps: replaces the list and cascades removals to resellers under an admin', async () => {
    const admin = await member(owner, { role: 'admin', allowed_apps: [appA, appB] });
    const adminApi = await admin.api();
    const sub = await member(adminApi, { allowed_apps: [appA, appB] });
    const subSession = await sub.api();
    const r = await owner.patch(`/api/team/${admin.id}/apps`, { allowed_apps: [appB] });
    expect(r.body.allowed_apps).toEqual([appB]);
    const subNow = (await owner.get('/api/team')).body.find((m: { id: string }) => m.id === sub.id);
    expect(subNow.allowed_apps).toEqual([appB]);
    expect((await subSession.get('/api/auth/me')).status).toBe(401);
    expect((await adminApi.patch(`/api/team/${sub.id}/apps`, [appA])).status).toBe(401); // the admin's own session was revoked too
  });

  it('credits: resellers only, clamped at zero; an unlimited reseller gets a finite balance', async () => {
    const m = await member(owner, { key_quota: 10 });
    expect((await owner.post(`/api/team/${m.id}/credits`, { amount: 5 })).body.credits).toBe(15);
    expect((await owner.post(`/api/team/${m.id}/credits`, { amount: -100 })).body.credits).toBe(0);
    const unlimited = await member(owner);
    expect((await owner.post(`/api/team/${unlimited.id}/credits`, { amount: 7 })).body).toMatchObject({
      credits: 7,
      key_quota: 7,
    });
    const admin = await member(owner, { role: 'admin' });
    const r = await owner.post(`/api/team/${admin.id}/credits`, { amount: 5 });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ detail: 'Credits only apply to resellers.' });
  });

  it('subscription: owner only, admins only, exactly one of clear / extend_days / expires_at', async () => {
    const admin = await member(owner, { role: 'admin' });
    const end = await owner.patch(`/api/team/${admin.id}/subscription`, { expires_at: '2030-01-15' });
    expect(end.body.subscription_expires_at).toBe('2030-01-15T23:59:59.999Z');
    const ext = await owner.patch(`/api/team/${admin.id}/subscription`, { extend_days: 10 });
    expect(ext.body.subscription_expires_at).toBe('2030-01-25T23:59:59.999Z');
    await owner.patch(`/api/team/${admin.id}/subscription`, { expires_at: '2020-01-01' });
    const fromNow = await owner.patch(`/api/team/${admin.id}/subscription`, { extend_days: 1 });
    expect(Math.abs(Date.parse(fromNow.body.subscription_expires_at) - Date.now() - 86_400_000)).toBeLessThan(60_000);
    expect(
      (await owner.patch(`/api/team/${admin.id}/subscription`, { clear: true })).body.subscription_expires_at,
    ).toBeNull();
    expect((await owner.patch(`/api/team/${admin.id}/subscription`, { clear: true, extend_days: 1 })).status).toBe(422);
    const reseller = await member(owner);
    expect((await owner.patch(`/api/team/${reseller.id}/subscription`, { clear: true })).status).toBe(400);
    const adminApi = await admin.api();
    const sub = await member(adminApi);
    expect((await adminApi.patch(`/api/team/${sub.id}/subscription`, { clear: true })).status).toBe(403);
  });

  it('an admin whose subscription ended is refused', async () => {
    const admin = await member(owner, { role: 'admin' });
    const adminApi = await admin.api();
    await owner.patch(`/api/team/${admin.id}/subscription`, { expires_at: '2020-01-01' });
    const r = await adminApi.get('/api/apps');
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ detail: 'Subscription expired' });
  });

  it("rule 6: a parent admin cannot reset another admin's password; the owner can", async () => {
    const admin = await member(owner, { role: 'admin' });
    const adminApi = await admin.api();
    const child = await member(adminApi);
    expect((await owner.patch(`/api/team/${child.id}`, { role: 'admin' })).body.role).toBe('admin'); // an admin under an admin
    expect((await adminApi.post(`/api/team/${child.id}/password`, { password: 'new-pass-123' })).status).toBe(403);
    expect((await owner.post(`/api/team/${child.id}/password`, { password: 'new-pass-123' })).body).toEqual({
      success: true,
    });
    expect(
      (await owner.post('/api/auth/login', { username: child.username, password: 'new-pass-123' }, { token: '' }))
        .status,
    ).toBe(200);
  });

  it('webhooks: public https only; resellers cannot set a global webhook', async () => {
    expect((await owner.patch('/api/account/webhook', { webhook: 'http://example.com/x' })).status).toBe(422);
    expect((await owner.patch('/api/account/webhook', { webhook: 'https://127.0.0.1/x' })).status).toBe(422);
    expect((await owner.patch('/api/account/webhook', { webhook: 'https://93.184.216.34/x' })).body.webhook).toBe(
      'https://93.184.216.34/x',
    );
    const m = await member(owner);
    expect((await owner.patch(`/api/team/${m.id}/webhook`, { webhook: 'https://93.184.216.34/m' })).body.webhook).toBe(
      'https://93.184.216.34/m',
    );
    const r = await (await m.api()).patch('/api/account/webhook', { webhook: 'https://93.184.216.34/r' });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ detail: "Resellers don't own apps" });
  });

  it('resellers get an empty team and cannot create members', async () => {
    const m = await member(owner);
    const api = await m.api();
    expect((await api.get('/api/team')).body).toEqual([]);
    expect((await api.post('/api/team', { username: 'nope1', password: 'member-pass-1' })).status).toBe(403);
  });
});
