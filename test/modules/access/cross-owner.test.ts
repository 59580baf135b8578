// docs/protocol.md 11.36 and 11.37, walking the router's own table: every dashboard route that names an
// application, or a key, end user, blacklist entry or product inside one, is called by every kind of
// caller of owner 1's tree (owner, admin, reseller with no permission and with all of them, API tokens
// with every scope, limited to an app, with one scope, a reseller's) with owner 2's ids: 404 with the
// record's own not-found text, never 403, so ids cannot be probed across owners. Inside the tree a
// missing permission or token scope stays 403, and a token limited by app_ids creates no application.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';
import { PERMISSION_KEYS } from '../../../src/platform/db/entities/index.js';
import { TOKEN_SCOPES } from '../../../src/modules/access/index.js';

const SCOPE_DENIED = { detail: 'Token scope does not allow this action' };

/** The first path segment a route names a record by, and that record's 404 text. */
const NOT_FOUND: Record<string, string> = {
  apps: 'Application not found',
  licenses: 'License not found',
  users: 'User not found',
  bans: 'Blacklist entry not found',
  products: 'Product not found',
  releases: 'Release not found',
};
const NAMES_RECORD = /^\/api\/(apps|licenses|users|bans|products|releases)\/:id(\/|$)/;

let t: TestServer;
let owner: Api;
let rival: Api;
let appA: string;
let appC: string;
let resellerId: string;
/** Owner 2's records, by the segment that names them. */
const theirs: Record<string, string> = {};
const callers: Record<string, Api> = {};

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return t.server.services.sql.all<T>(text, params);
}

async function token(api: Api, scopes: readonly string[], appIds: string[] | null): Promise<Api> {
  const r = await api.post('/api/tokens', {
    name: `x${Math.random().toString(36).slice(2, 8)}`,
    scopes,
    app_ids: appIds,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return api.as(r.body.token);
}

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  await createAccount(t, { username: 'secondowner', password: 'second-pass-1' });
  rival = await new Api(t.base).signIn('secondowner', 'second-pass-1');

  appA = (await owner.post('/api/apps', { name: 'Ours A' })).body.id;
  appC = (await owner.post('/api/apps', { name: 'Ours C' })).body.id;
  await owner.post('/api/team', { username: 'xadmin', password: 'admin-pass-1', role: 'admin', allowed_apps: [appA] });
  const admin = await new Api(t.base).signIn('xadmin', 'admin-pass-1');
  resellerId = (await owner.post('/api/team', { username: 'xseller', password: 'seller-pass-1', allowed_apps: [appA] }))
    .body.id;
  await owner.post('/api/team', { username: 'xfull', password: 'seller-pass-1', allowed_apps: [appA] });
  await sql(`update accounts set permissions = ?::jsonb where username = 'xfull'`, [
    JSON.stringify(Object.fromEntries(PERMISSION_KEYS.map((k) => [k, true]))),
  ]);
  const reseller = await new Api(t.base).signIn('xseller', 'seller-pass-1');
  const full = await new Api(t.base).signIn('xfull', 'seller-pass-1');
  Object.assign(callers, {
    owner,
    admin,
    'reseller without permissions': reseller,
    'reseller with every permission': full,
    'owner token, every scope': await token(owner, TOKEN_SCOPES, null),
    'owner token, every scope, app_ids [A]': await token(owner, TOKEN_SCOPES, [appA]),
    'owner token, apps:read only': await token(owner, ['apps:read'], null),
    'admin token, app_ids [A]': await token(admin, TOKEN_SCOPES, [appA]),
    'reseller token, every scope': await token(reseller, TOKEN_SCOPES, null),
  });

  // Owner 2's application and a record of every kind inside it.
  const appB = (await rival.post('/api/apps', { name: 'Theirs' })).body.id as string;
  theirs.apps = appB;
  const [key] = (await rival.post(`/api/apps/${appB}/licenses`, { amount: 1, duration: 5 })).body;
  theirs.licenses = key.id;
  const [user] = await sql<{ id: string }>(
    `insert into end_users (id, app_id, username, password_hash, created_at, level, license_id)
     values (gen_random_uuid(), ?, 'theiruser', 'x', now(), 1, ?) returning id`,
    [appB, key.id],
  );
  theirs.users = user!.id;
  theirs.bans = (await rival.post(`/api/apps/${appB}/bans`, { type: 'hwid', value: 'their-device' })).body.id;
  theirs.products = (await rival.post(`/api/apps/${appB}/products`, { name: 'Theirs', duration: 30 })).body.id;
  theirs.releases = (await rival.post(`/api/apps/${appB}/releases`, { version: '1.0.0' })).body.id;
  for (const [kind, id] of Object.entries(theirs)) expect(id, `owner 2's ${kind}`).toMatch(/^[0-9a-f-]{36}$/);
}, 120_000);
afterAll(() => t.close());

/** Every dashboard route that names a record inside an application (the WebSocket names none in its path). */
function namingRoutes() {
  return t.server.app.router.routes.filter((r) => r.doc.auth === 'dashboard' && NAMES_RECORD.test(r.path));
}

describe("another owner's application does not exist for this tree (docs/protocol.md 11.36)", () => {
  it('the walk covers every kind of record and the routes of each', () => {
    const routes = namingRoutes();
    expect(routes.length).toBeGreaterThan(30);
    for (const kind of Object.keys(NOT_FOUND))
      expect(
        routes.some((r) => r.path.startsWith(`/api/${kind}/`)),
        kind,
      ).toBe(true);
  });

  it("owner 2's ids are real: owner 2 reaches each of them", async () => {
    expect((await rival.get(`/api/apps/${theirs.apps}`)).status).toBe(200);
    expect((await rival.get(`/api/products/${theirs.products}`)).status).toBe(200);
    expect((await rival.get(`/api/apps/${theirs.apps}/users`)).body.items ?? []).toBeDefined();
  });

  it("every caller of owner 1's tree gets 404 and the record's not-found text on every route, never 403", async () => {
    const wrong: string[] = [];
    let calls = 0;
    for (const r of namingRoutes()) {
      const kind = NAMES_RECORD.exec(r.path)![1]!;
      const path = r.path
        .replace(':id', theirs[kind]!)
        .replace(':hwid', 'their-device')
        .replace(':lang', 'python')
        .replace(/:[A-Za-z_]+/g, 'x');
      const body = r.method === 'get' || r.method === 'delete' ? undefined : {};
      const variants = r.unprefixed ? [path, path.replace(/^\/api/, '')] : [path];
      for (const [who, api] of Object.entries(callers))
        for (const p of variants) {
          const res = await api.call(r.method.toUpperCase(), p, body);
          calls++;
          if (res.status !== 404 || res.body?.detail !== NOT_FOUND[kind])
            wrong.push(`${who}: ${r.method.toUpperCase()} ${p} -> ${res.status} ${JSON.stringify(res.body)}`);
        }
    }
    expect(calls).toBeGreaterThan(250);
    expect(wrong).toEqual([]);
  }, 120_000);

  it("naming owner 2's application in a member's app list is 404; an unassigned app of the tree stays 403", async () => {
    const r = await owner.patch(`/api/team/${resellerId}/apps`, [appA, theirs.apps]);
    expect([r.status, r.body]).toEqual([404, { detail: 'Application not found' }]);
    const c = await callers.admin!.patch(`/api/team/${resellerId}/apps`, [appC]);
    expect([c.status, c.body]).toEqual([403, { detail: 'Permission denied' }]);
    const created = await owner.post('/api/team', {
      username: 'xother',
      password: 'seller-pass-1',
      allowed_apps: [theirs.apps],
    });
    expect([created.status, created.body]).toEqual([404, { detail: 'Application not found' }]);
  });

  it('inside the tree a missing permission or token scope is still 403', async () => {
    const bare = await callers['reseller without permissions']!.get(`/api/apps/${appA}/licenses`);
    expect([bare.status, bare.body]).toEqual([403, { detail: 'Permission denied' }]);
    const limited = await callers['owner token, every scope, app_ids [A]']!.get(`/api/apps/${appC}`);
    expect([limited.status, limited.body]).toEqual([403, SCOPE_DENIED]);
    const narrow = await callers['owner token, apps:read only']!.patch(`/api/apps/${appA}`, { keys_paused: false });
    expect([narrow.status, narrow.body]).toEqual([403, SCOPE_DENIED]);
    // An app of the owner's that the admin was not given does not exist for the admin.
    const notGiven = await callers.admin!.get(`/api/apps/${appC}/licenses`);
    expect([notGiven.status, notGiven.body]).toEqual([404, { detail: 'Application not found' }]);
  });
});

describe('a token limited by app_ids creates no application (docs/protocol.md 11.37)', () => {
  it('403 with the scope text, and nothing is created; a token without app_ids may', async () => {
    const before = (await owner.get('/api/apps')).body.length as number;
    for (const who of ['owner token, every scope, app_ids [A]', 'admin token, app_ids [A]']) {
      const r = await callers[who]!.post('/api/apps', { name: 'Should not exist' });
      expect([who, r.status, r.body]).toEqual([who, 403, SCOPE_DENIED]);
      const bare = await callers[who]!.post('/apps', { name: 'Should not exist' });
      expect([who, bare.status]).toEqual([who, 403]);
    }
    expect((await owner.get('/api/apps')).body.length).toBe(before);
    const full = await callers['owner token, every scope']!.post('/api/apps', { name: 'Made by token' });
    expect(full.status, JSON.stringify(full.body)).toBeLessThan(300);
    expect((await owner.get('/api/apps')).body.length).toBe(before + 1);
  });
});
