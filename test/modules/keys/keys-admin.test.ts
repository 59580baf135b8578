// Dashboard management of keys and end users, with reseller scoping and hiding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

async function registerUser(f: AppFixture, username: string, key: string) {
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/register', {
    session,
    username,
    password: 'pw-user-1',
    license: key,
    hwid: hwid(username),
  });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  return { c, session };
}

async function reseller(f: AppFixture, name: string, permissions: Record<string, boolean>) {
  const r = await f.owner.post('/api/team', {
    username: name,
    password: 'seller-pass-1',
    allowed_apps: [f.app.id],
    permissions,
  });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  return { id: r.body.id as string, api: await new Api(t.base).signIn(name, 'seller-pass-1') };
}

describe('license keys', () => {
  it('lists metadata only, newest first, with status, q and cursor filters', async () => {
    const f = await appFixture(t);
    const keys = await f.keys(3, { note: 'alpha' });
    await f.keys(2, { note: 'beta' });
    await registerUser(f, 'lister', keys[0]!);
    const all = await f.owner.get(`/api/apps/${f.app.id}/licenses`);
    expect(all.status).toBe(200);
    expect(all.body.items).toHaveLength(5);
    expect(JSON.stringify(all.body)).not.toContain(keys[0]);
    expect(all.body.items[0].key).toBeUndefined();
    expect(
      (await f.owner.get(`/api/apps/${f.app.id}/licenses?status=active`)).body.items.map((k: any) => k.used_by),
    ).toEqual(['lister']);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?status=unactivated`)).body.items).toHaveLength(4);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=beta`)).body.items).toHaveLength(2);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=lister`)).body.items).toHaveLength(1);
    const page1 = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=2`);
    const page2 = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=2&cursor=${page1.body.next_cursor}`);
    const page3 = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=2&cursor=${page2.body.next_cursor}`);
    const ids = [...page1.body.items, ...page2.body.items, ...page3.body.items].map((k: any) => k.id);
    expect(new Set(ids).size).toBe(5);
    expect(page3.body.next_cursor).toBeNull();
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?status=weird`)).status).toBe(422);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?cursor=garbage`)).status).toBe(422);
  });

  it('extends and subtracts activated keys (and their user); refuses lifetime and never-activated keys', async () => {
    const f = await appFixture(t);
    const [used, fresh] = await f.keys(2);
    const [life] = await f.keys(1, { unit: 'lifetime' });
    await registerUser(f, 'ext', used!);
    const id = async (note?: string) =>
      (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${note}`)).body.items[0].id as string;
    const usedId = await id('ext');
    const before = Date.parse((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=ext`)).body.items[0].expires_at);
    const plus = await f.owner.post(`/licenses/${usedId}/extend`, { value: 2, unit: 'days' });
    expect(Date.parse(plus.body.expires_at) - before).toBe(2 * 86_400_000);
    const minus = await f.owner.post(`/api/licenses/${usedId}/extend`, { value: 1, unit: 'weeks', subtract: true });
    expect(Date.parse(minus.body.expires_at) - before).toBe(-5 * 86_400_000);
    const [user] = await f.sql(`select expires_at from end_users where username = 'ext' and app_id = $1`, [f.app.id]);
    expect(new Date(user.expires_at).toISOString()).toBe(minus.body.expires_at);
    const rows = (await f.owner.get(`/api/apps/${f.app.id}/licenses?status=unactivated`)).body.items as any[];
    const lifeId = rows.find((k) => k.duration_unit === 'lifetime').id;
    const freshId = rows.find((k) => k.duration_unit !== 'lifetime').id;
    expect((await f.owner.post(`/licenses/${lifeId}/extend`, { value: 1, unit: 'days' })).body).toEqual({
      detail: 'Lifetime keys cannot be extended',
    });
    expect((await f.owner.post(`/licenses/${freshId}/extend`, { value: 1, unit: 'days' })).body).toEqual({
      detail: 'Key has not been activated yet',
    });
    void fresh;
    void life;
  });

  it('extend-all extends active keys and skips unused and lifetime ones', async () => {
    const f = await appFixture(t);
    const [a, b] = await f.keys(2);
    await f.keys(1);
    const [life] = await f.keys(1, { unit: 'lifetime' });
    await registerUser(f, 'ea1', a!);
    await registerUser(f, 'ea2', b!);
    await registerUser(f, 'ea3', life!);
    const r = await f.owner.post(`/apps/${f.app.id}/licenses/extend-all`, { value: 3, unit: 'hours' });
    expect(r.body).toEqual({ extended: 2, skipped: 2 });
  });

  it('reset-hwid, ban toggle (unban back to used or unused) and delete', async () => {
    const f = await appFixture(t);
    const [k1, k2] = await f.keys(2);
    await registerUser(f, 'banme', k1!);
    const list = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items as any[];
    const usedId = list.find((k) => k.used_by === 'banme').id;
    const freshId = list.find((k) => k.used_by === '').id;
    await f.owner.post(`/licenses/${usedId}/reset-hwid`);
    expect((await f.sql('select hwid from license_keys where id = $1', [usedId]))[0].hwid).toBe('');
    expect((await f.owner.patch(`/licenses/${usedId}/ban`, {})).body).toMatchObject({
      status: 'banned',
      computed_status: 'banned',
    });
    expect((await f.owner.patch(`/licenses/${usedId}/ban`, {})).body.status).toBe('used');
    expect((await f.owner.patch(`/licenses/${freshId}/ban`, { banned: true })).body.status).toBe('banned');
    expect((await f.owner.patch(`/licenses/${freshId}/ban`, { banned: false })).body.status).toBe('unused');
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.ban`)).body;
    expect(logs).toHaveLength(4);
    expect((await f.owner.delete(`/licenses/${freshId}`)).body).toEqual({ success: true });
    expect((await f.owner.delete(`/licenses/${freshId}`)).status).toBe(404);
    void k2;
  });

  it("deleting a key fails its user's next login and kills its live heartbeat at the next beat", async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const { c, session } = await registerUser(f, 'doomed', key!);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: 'system-0001' });
    const keyId = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items[0].id;
    await f.owner.delete(`/api/licenses/${keyId}`);
    const beat = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: 'system-0001',
      beat_index: 1,
      code_hash: 'abcdef0123',
    });
    expect(beat.status).toBe(403);
    expect(beat.body).toEqual({ detail: 'rejected' });
    const c2 = f.client();
    const s2 = await f.session(c2);
    expect(
      (
        await c2.post('/api/client/login', {
          session: s2,
          username: 'doomed',
          password: 'pw-user-1',
          hwid: hwid('doomed'),
        })
      ).status,
    ).toBe(401);
  });
});

describe('end users', () => {
  it('lists users newest first; reset-hwid, ban and delete are audited; the key survives a user delete', async () => {
    const f = await appFixture(t);
    const [k1, k2] = await f.keys(2);
    await registerUser(f, 'first', k1!);
    await registerUser(f, 'second', k2!);
    const users = (await f.owner.get(`/api/apps/${f.app.id}/users`)).body as any[];
    expect(users.map((u) => u.username)).toEqual(['second', 'first']);
    expect(users[0]).toMatchObject({ hwid: '', known_hwids: [hwid('second')], banned: false, last_login: null });
    const id = users[0].id;
    expect((await f.owner.post(`/api/users/${id}/reset-hwid`)).body).toEqual({ success: true });
    expect((await f.owner.patch(`/api/users/${id}/ban`, { banned: true })).body).toEqual({ success: true });
    const c = f.client();
    const s = await f.session(c);
    expect(
      (await c.post('/api/client/login', { session: s, username: 'second', password: 'pw-user-1', hwid: hwid('x') }))
        .status,
    ).toBe(401);
    await f.owner.patch(`/api/users/${id}/ban`, { banned: false });
    expect(
      (await c.post('/api/client/login', { session: s, username: 'second', password: 'pw-user-1', hwid: hwid('x') }))
        .status,
    ).toBe(200);
    expect((await f.owner.delete(`/api/users/${id}`)).body).toEqual({ success: true });
    expect(
      (await f.sql(`select status, used_by from license_keys where used_by = 'second' and app_id = $1`, [f.app.id]))[0],
    ).toEqual({ status: 'used', used_by: 'second' });
    const actions = (await f.owner.get(`/api/apps/${f.app.id}/logs`)).body.map((l: any) => l.action);
    for (const a of ['user.reset_hwid', 'user.ban', 'user.delete']) expect(actions).toContain(a);
    expect((await f.owner.delete(`/api/users/${id}`)).status).toBe(404);
  });
});

describe('reseller scoping and hiding', () => {
  it("resellers see only their subtree's keys and users, without hidden fields, and cannot touch a peer's", async () => {
    const f = await appFixture(t);
    const a = await reseller(f, 'scopeA', { view_keys: true, generate_keys: true, delete_keys: true });
    const b = await reseller(f, 'scopeB', { view_keys: true, generate_keys: true, view_hwid: true, view_ip: true });
    const aKeys = (await a.api.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 5 })).body;
    const bKeys = (await b.api.post(`/apps/${f.app.id}/licenses`, { amount: 2, duration: 5 })).body;
    await registerUser(f, 'buyerA', aKeys[0].key);
    await registerUser(f, 'buyerB', bKeys[0].key);
    const aList = (await a.api.get(`/api/apps/${f.app.id}/licenses`)).body.items as any[];
    expect(aList.map((k) => k.id)).toEqual([aKeys[0].id]);
    expect(aList[0].hwid).toBeUndefined();
    expect(aList[0].ip).toBeUndefined();
    const bList = (await b.api.get(`/api/apps/${f.app.id}/licenses`)).body.items as any[];
    expect(bList).toHaveLength(2);
    expect(bList.find((k) => k.used_by === 'buyerB')).toHaveProperty('hwid');
    const aUsers = (await a.api.get(`/api/apps/${f.app.id}/users`)).body as any[];
    expect(aUsers.map((u) => u.username)).toEqual(['buyerA']);
    expect(aUsers[0]).not.toHaveProperty('hwid');
    expect(aUsers[0]).not.toHaveProperty('ip');
    expect(aUsers[0]).not.toHaveProperty('screenshot_path');
    expect((await a.api.delete(`/licenses/${bKeys[0].id}`)).status).toBe(404); // a peer's key: not found
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items).toHaveLength(3);
    const stats = await b.api.get(`/api/apps/${f.app.id}/stats`);
    expect(stats.status).toBe(403); // no view_stats
    const ownerStats = await f.owner.get(`/api/apps/${f.app.id}/stats`);
    expect(ownerStats.body).toMatchObject({
      keys: { total: 3, active: 2, unactivated: 1, banned: 0, expired: 0 },
      users: 2,
      live_sessions: 0,
      logins_24h: 0,
    });
  });

  it('PATCH /api/licenses/{id}: a reseller changes max_sessions of its own keys with generate_keys only', async () => {
    const f = await appFixture(t);
    const a = await reseller(f, 'seatsA', { view_keys: true, generate_keys: true });
    const b = await reseller(f, 'seatsB', { view_keys: true, generate_keys: true });
    const c = await reseller(f, 'seatsC', { view_keys: true });
    const [own] = (await a.api.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 5 })).body;
    const [peer] = (await b.api.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 5 })).body;
    const ok = await a.api.patch(`/api/licenses/${own.id}`, { max_sessions: 4 });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id: own.id, max_sessions: 4, live_sessions: 0 });
    expect(ok.body).not.toHaveProperty('hwid');
    expect((await a.api.patch(`/api/licenses/${peer.id}`, { max_sessions: 4 })).status).toBe(404);
    const denied = await c.api.patch(`/api/licenses/${own.id}`, { max_sessions: 4 });
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({ detail: 'Permission denied' });
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.update`)).body as any[];
    expect(logs).toHaveLength(1);
    expect(logs[0].actor).toMatchObject({ username: 'seatsA', role: 'reseller' });
  });

  it('the credentials card hides api_secret from resellers', async () => {
    const f = await appFixture(t);
    const r = await reseller(f, 'cardR', {});
    expect((await f.owner.get(`/api/apps/${f.app.id}/credentials`)).body).toEqual({
      api_key: f.app.api_key,
      api_secret: f.app.api_secret,
      owner_id: f.app.owner_id,
    });
    expect((await r.api.get(`/api/apps/${f.app.id}/credentials`)).body).toEqual({
      api_key: f.app.api_key,
      owner_id: f.app.owner_id,
    });
  });
});
