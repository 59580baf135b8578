// Who did what (docs/protocol.md 13.3): every dashboard write's audit entry names its actor (and the token,
// when one was used) in the application's log; account-level events go to GET /api/audit, which an
// owner reads for its tree, an admin for its subtree, a reseller for itself, newest first with a
// cursor; the application log filters by actor.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;
let admin: Api;
let reseller: Api;
let appId: string;
let ids: Record<'owner' | 'admin' | 'reseller', string>;

beforeAll(async () => {
  t = await startTestServer({
    DEVELOPER_EMAILS: 'dev@audit.test',
    DEVELOPER_USERNAME: 'auditdev',
    DEVELOPER_PASSWORD: 'dev-pass-123',
  });
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appId = (await owner.post('/api/apps', { name: 'Audited' })).body.id;
  const adminId = (
    await owner.post('/api/team', {
      username: 'audadmin',
      password: 'admin-pass-1',
      role: 'admin',
      allowed_apps: [appId],
    })
  ).body.id;
  admin = await new Api(t.base).signIn('audadmin', 'admin-pass-1');
  const resellerId = (
    await admin.post('/api/team', {
      username: 'audseller',
      password: 'seller-pass-1',
      allowed_apps: [appId],
      permissions: { generate_keys: true, view_auth_logs: true, ban_unban_keys: true },
    })
  ).body.id;
  reseller = await new Api(t.base).signIn('audseller', 'seller-pass-1');
  const me = (await owner.get('/api/auth/me')).body.account.id;
  ids = { owner: me, admin: adminId, reseller: resellerId };
});
afterAll(() => t.close());

describe("actors on an application's log", () => {
  it('names who made each dashboard change; client calls have none', async () => {
    const [k] = (await reseller.post(`/api/apps/${appId}/licenses`, { amount: 1, duration: 1 })).body;
    await reseller.patch(`/api/licenses/${k.id}/ban`, { banned: true });
    await owner.patch(`/api/apps/${appId}`, { description: 'audited app' });
    await owner.post(`/api/apps/${appId}/bans`, { type: 'ip', value: '203.0.113.9' });
    const client = await fetch(`${t.base}/api/client/init`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: 'nope', version: '1.0' }),
    });
    expect(client.status).toBe(404);
    const logs = (await owner.get(`/api/apps/${appId}/logs`)).body as { action: string; actor: unknown }[];
    const byAction = (a: string) => logs.find((e) => e.action === a)!;
    expect(byAction('license.ban').actor).toEqual({ id: ids.reseller, username: 'audseller', role: 'reseller' });
    expect(byAction('app.update').actor).toEqual({ id: ids.owner, username: 'owner', role: 'owner' });
    expect(byAction('blacklist.add').actor).toMatchObject({ username: 'owner' });
    expect(byAction('app.create').actor).toMatchObject({ username: 'owner' });

    const sellers = (await owner.get(`/api/apps/${appId}/logs?actor=AUDSELLER`)).body as {
      actor: { username: string };
    }[];
    expect(sellers.length).toBeGreaterThanOrEqual(2);
    for (const e of sellers) expect(e.actor.username).toBe('audseller');
    // A reseller sees its own records' entries (docs/protocol.md 11.9), with their actors.
    const own = (await reseller.get(`/api/apps/${appId}/logs`)).body as { actor: { username: string } | null }[];
    expect(own.length).toBeGreaterThan(0);
    for (const e of own) expect(e.actor?.username).toBe('audseller');
  });
});

describe('GET /api/audit', () => {
  it("shows an owner its tree's account events, an admin its subtree's, a reseller its own", async () => {
    await owner.post('/api/team', { username: 'audextra', password: 'extra-pass-1' });
    await admin.post(`/api/team/${ids.reseller}/credits`, { amount: 5 });
    await createAccount(t, { username: 'audrival', password: 'rival-pass-1' });
    const rival = await new Api(t.base).signIn('audrival', 'rival-pass-1');
    const actors = async (api: Api, query = '') =>
      new Set(
        ((await api.get(`/api/audit${query}`)).body as { actor: { username: string } }[]).map((e) => e.actor.username),
      );

    const forOwner = await actors(owner);
    for (const u of ['owner', 'audadmin', 'audseller']) expect(forOwner).toContain(u);
    expect(forOwner).not.toContain('audrival');
    expect([...(await actors(admin))].sort()).toEqual(['audadmin', 'audseller']);
    expect([...(await actors(reseller))]).toEqual(['audseller']);
    expect([...(await actors(rival))]).toEqual(['audrival']);
    const developer = await new Api(t.base).signIn('auditdev', 'dev-pass-123');
    expect(await actors(developer)).toContain('audrival');

    const entries = (await owner.get('/api/audit?action=team.credits')).body;
    expect(entries[0]).toMatchObject({
      action: 'team.credits',
      detail: '+5 credits for audseller',
      actor: { id: ids.admin, username: 'audadmin', role: 'admin' },
      ip: '127.0.0.1',
    });
    expect(entries[0].app_id).toBeUndefined();
    const logins = (await owner.get('/api/audit?action=auth.login&actor=audseller')).body;
    expect(logins[0]).toMatchObject({ action: 'auth.login', actor: { username: 'audseller' } });
  });

  it('pages newest first with before=<id>, every entry once', async () => {
    const all = (await owner.get('/api/audit?limit=1000')).body as { id: string }[];
    expect(all.length).toBeGreaterThan(6);
    const seen: string[] = [];
    let before = '';
    for (;;) {
      const page = (await owner.get(`/api/audit?limit=3${before ? `&before=${before}` : ''}`)).body as { id: string }[];
      seen.push(...page.map((e) => e.id));
      if (page.length < 3) break;
      before = page[page.length - 1]!.id;
    }
    expect(seen).toEqual(all.map((e) => e.id));
    expect([...seen].sort((a, b) => Number(b) - Number(a))).toEqual(seen);
    expect((await owner.get('/api/audit?before=abc')).status).toBe(422);
  });

  it('keeps passwords out of every audit field', async () => {
    await owner.post(`/api/team/${ids.reseller}/password`, { password: 'fresh-secret-pass-9' });
    await owner.post('/api/auth/password', { current_password: OWNER.password, password: 'owner-next-pass-2' });
    const rows = JSON.stringify(await t.server.services.sql.all('select * from audit_log'));
    for (const p of ['fresh-secret-pass-9', 'owner-next-pass-2', OWNER.password, 'seller-pass-1', 'admin-pass-1'])
      expect(rows).not.toContain(p);
  });
});
