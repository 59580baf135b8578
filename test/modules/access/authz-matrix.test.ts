// Every dashboard route as owner, admin, reseller (without permissions, and with exactly the
// permission the route needs), developer, a second owner and anonymous: allowed or denied, and
// the fields hidden. The table is checked against the router, so a new route needs a row here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';
import { PERMISSION_KEYS, type PermissionKey } from '../../../src/platform/db/entities/index.js';

let t: TestServer;
let owner: Api;
let admin: Api;
let reseller: Api;
let developer: Api;
let rival: Api;
let resellerId: string;
let adminId: string;
let appId: string;

type Who = 'owner' | 'admin' | 'reseller' | 'reseller+perm' | 'developer' | 'rival' | 'anonymous';

async function sql(text: string, params: unknown[] = []) {
  return t.server.services.sql.all(text, params);
}

const MATRIX_DEVICE = 'matrix-device-0001';

/** Resources are made fresh for every attempt, so destructive routes never see each other's leftovers. */
const make = {
  async app() {
    const id = (await owner.post('/apps', { name: 'Matrix' })).body.id as string;
    await sql(`update accounts set allowed_apps = allowed_apps || ?::jsonb where id in (?, ?)`, [
      JSON.stringify([id]),
      adminId,
      resellerId,
    ]);
    return id;
  },
  /** A key in the reseller's scope (and so in its admin's), activated so it can be extended. */
  async lic() {
    const [k] = (await owner.post(`/apps/${appId}/licenses`, { amount: 1, duration: 5 })).body;
    await sql(
      `update license_keys set reseller_id = ?, status = 'used', used_by = 'license-only', expires_at = now() + interval '5 days' where id = ?`,
      [resellerId, k.id],
    );
    // One device (docs/protocol.md 12.1), so the device routes have something to remove.
    await sql(
      `insert into key_devices (license_id, hwid, first_seen, last_seen, bound) values (?, ?, now(), now(), true)`,
      [k.id, MATRIX_DEVICE],
    );
    return k.id as string;
  },
  async user() {
    const lic = await make.lic();
    const [row] = await sql(
      `insert into end_users (id, app_id, username, password_hash, created_at, level, reseller_id, license_id)
       values (gen_random_uuid(), ?, ?, 'x', now(), 1, ?, ?) returning id`,
      [appId, `u${Math.random().toString(36).slice(2)}`, resellerId, lic],
    );
    const id = (row as { id: string }).id;
    await sql(
      `insert into user_devices (user_id, hwid, first_seen, last_seen, bound) values (?, ?, now(), now(), true)`,
      [id, MATRIX_DEVICE],
    );
    return id;
  },
  async hwid() {
    return MATRIX_DEVICE;
  },
  async ban() {
    const r = await owner.post(`/apps/${appId}/bans`, {
      type: 'ip',
      value: `198.51.100.${Math.floor(Math.random() * 250)}`,
    });
    if (r.status !== 200) throw new Error(`ban setup: ${JSON.stringify(r.body)} app ${appId}`);
    return r.body.id as string;
  },
  /** A reseller under the admin (inside the admin's subtree). */
  async member() {
    const r = await admin.post('/api/team', {
      username: `mx${Math.random().toString(36).slice(2, 10)}`,
      password: 'member-pass-1',
    });
    return r.body.id as string;
  },
  async lang() {
    return 'python';
  },
  /** A draft release with one artifact (`{file}`), so it can be published (docs/releases.md). */
  async release() {
    const r = await owner.post(`/api/apps/${appId}/releases`, {
      version: `1.0.0-m${Math.random().toString(36).slice(2)}`,
    });
    if (r.status !== 201) throw new Error(`release setup: ${JSON.stringify(r.body)}`);
    const u = await owner.call('PUT', `/api/releases/${r.body.id}/artifacts/${await make.file()}`, undefined, {
      rawBody: Buffer.from('matrix artifact'),
      headers: { 'content-type': 'application/octet-stream' },
    });
    if (u.status !== 201) throw new Error(`artifact setup: ${JSON.stringify(u.body)}`);
    return r.body.id as string;
  },
  async file() {
    return 'matrix.bin';
  },
  /** An admin directly under the owner (subscription targets). */
  async subadmin() {
    const r = await owner.post('/api/team', {
      username: `ad${Math.random().toString(36).slice(2, 10)}`,
      password: 'member-pass-1',
      role: 'admin',
    });
    return r.body.id as string;
  },
};
type Param = keyof typeof make;

/** An air-gapped machine's activation request (docs/air-gapped.md) for a fresh key of the path's app, in the reseller's scope. */
async function activationBody(path: string): Promise<unknown> {
  const app = /\/apps\/([^/]+)\//.exec(path)![1]!;
  const [k] = (await owner.post(`/apps/${app}/licenses`, { amount: 1, duration: 5 })).body;
  await sql('update license_keys set reseller_id = ? where id = ?', [resellerId, k.id]);
  const request = {
    v: 1,
    app_id: app,
    key: k.key,
    hwid: MATRIX_DEVICE,
    nonce: Buffer.alloc(16, 1).toString('base64url'),
    created_at: new Date().toISOString(),
  };
  return { request: `kwreq1.${Buffer.from(JSON.stringify(request)).toString('base64url')}` };
}

interface Row {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  path: string;
  /** A query string the route needs (appended to the path as it is). */
  query?: string;
  /** The body, or made for the concrete path (an activation request must name that path's app). */
  body?: unknown;
  makeBody?: (path: string) => Promise<unknown>;
  /** What a reseller needs: a permission, 'allow' (nothing), or 'deny' (never). */
  reseller: PermissionKey | 'allow' | 'deny';
  admin?: boolean;
  /** A second owner: 'empty' routes answer 200 with nothing of ours; others 404. */
  rival?: 'allowed' | 'hidden';
}

const ROWS: Row[] = [
  { method: 'GET', path: '/api/auth/me', reseller: 'allow', rival: 'allowed' },
  { method: 'POST', path: '/api/apps', body: { name: 'x' }, reseller: 'deny', rival: 'allowed' },
  { method: 'GET', path: '/api/apps', reseller: 'allow', rival: 'allowed' },
  { method: 'GET', path: '/api/apps/{app}', reseller: 'allow' },
  { method: 'PATCH', path: '/api/apps/{app}', body: { keys_paused: false }, reseller: 'deny' },
  { method: 'DELETE', path: '/api/apps/{app}', reseller: 'deny' },
  { method: 'POST', path: '/api/apps/{app}/rotate-secret', reseller: 'deny' },
  { method: 'PUT', path: '/api/apps/{app}/hashes', body: { hashes: [] }, reseller: 'deny' },
  { method: 'POST', path: '/api/apps/{app}/notice', body: { message: 'matrix notice' }, reseller: 'deny' },
  { method: 'POST', path: '/api/apps/{app}/licenses', body: { amount: 1, duration: 1 }, reseller: 'generate_keys' },
  { method: 'GET', path: '/api/apps/{app}/logs', reseller: 'view_auth_logs' },
  { method: 'POST', path: '/api/apps/{app}/bans', body: { type: 'hwid', value: 'matrix-hwid' }, reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/bans', reseller: 'view_blocked_ips' },
  { method: 'DELETE', path: '/api/bans/{ban}', reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/licenses', reseller: 'view_keys' },
  // A job reads its keys as the listing does; each key then needs the single action's permission (jobs.test.ts).
  { method: 'POST', path: '/api/apps/{app}/jobs', body: { action: 'reset_hwid', filter: {} }, reseller: 'view_keys' },
  { method: 'POST', path: '/api/licenses/{lic}/extend', body: { value: 1, unit: 'days' }, reseller: 'deny' },
  { method: 'POST', path: '/api/apps/{app}/licenses/extend-all', body: { value: 1, unit: 'days' }, reseller: 'deny' },
  { method: 'POST', path: '/api/licenses/{lic}/reset-hwid', reseller: 'reset_hwid' },
  { method: 'DELETE', path: '/api/licenses/{lic}/devices/{hwid}', reseller: 'reset_hwid' },
  { method: 'PATCH', path: '/api/licenses/{lic}', body: { note: 'matrix' }, reseller: 'generate_keys' },
  { method: 'POST', path: '/api/licenses/{lic}/offline', body: { hwid: MATRIX_DEVICE }, reseller: 'generate_keys' },
  {
    method: 'POST',
    path: '/api/apps/{app}/offline-activations',
    makeBody: activationBody,
    reseller: 'generate_keys',
  },
  {
    method: 'POST',
    path: '/api/licenses/{lic}/pools',
    body: { seats: 2, valid_days: 30, relay_id: 'matrix-relay' },
    reseller: 'deny',
  },
  { method: 'GET', path: '/api/apps/{app}/entitlements', reseller: 'allow' },
  { method: 'PUT', path: '/api/apps/{app}/entitlements', body: { entitlements: [] }, reseller: 'deny' },
  { method: 'PATCH', path: '/api/licenses/{lic}/ban', body: {}, reseller: 'ban_unban_keys' },
  { method: 'PATCH', path: '/api/licenses/{lic}', body: { max_sessions: 2 }, reseller: 'generate_keys' },
  { method: 'DELETE', path: '/api/licenses/{lic}', reseller: 'delete_keys' },
  { method: 'GET', path: '/api/apps/{app}/users', reseller: 'view_keys' },
  { method: 'POST', path: '/api/users/{user}/reset-hwid', reseller: 'reset_hwid' },
  { method: 'DELETE', path: '/api/users/{user}/devices/{hwid}', reseller: 'reset_hwid' },
  { method: 'PATCH', path: '/api/users/{user}/ban', body: { banned: true }, reseller: 'freeze_unfreeze' },
  { method: 'DELETE', path: '/api/users/{user}', reseller: 'delete_keys' },
  { method: 'GET', path: '/api/apps/{app}/stats', reseller: 'view_stats' },
  {
    method: 'GET',
    path: '/api/apps/{app}/timeseries',
    query: '?metric=activations&bucket=day',
    reseller: 'view_stats',
  },
  { method: 'GET', path: '/api/overview', reseller: 'view_stats', rival: 'allowed' },
  { method: 'GET', path: '/api/apps/{app}/licenses/export.csv', reseller: 'view_keys' },
  { method: 'GET', path: '/api/apps/{app}/users/export.csv', reseller: 'view_keys' },
  { method: 'GET', path: '/api/apps/{app}/logs/export.csv', reseller: 'view_auth_logs' },
  {
    method: 'POST',
    path: '/api/apps/{app}/licenses/import',
    body: { format: 'list', keys: [{ key: 'MATRIX-IMPORT-RANDOM' }] },
    reseller: 'deny',
  },
  { method: 'POST', path: '/api/apps/{app}/products', body: { name: 'RANDOM', duration: 30 }, reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/products', reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/orders', reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/credentials', reseller: 'allow' },
  { method: 'GET', path: '/api/apps/{app}/sdk/{lang}', reseller: 'deny' },
  { method: 'GET', path: '/api/team', reseller: 'allow', rival: 'allowed' },
  {
    method: 'POST',
    path: '/api/team',
    body: { username: 'RANDOM', password: 'member-pass-1' },
    reseller: 'deny',
    rival: 'allowed',
  },
  { method: 'PATCH', path: '/api/team/{member}', body: { enabled: true }, reseller: 'deny' },
  { method: 'DELETE', path: '/api/team/{member}', reseller: 'deny' },
  {
    method: 'PATCH',
    path: '/api/team/{member}/permissions',
    body: { permissions: { view_keys: true } },
    reseller: 'deny',
  },
  { method: 'PATCH', path: '/api/team/{member}/apps', body: [], reseller: 'deny' },
  { method: 'POST', path: '/api/team/{member}/credits', body: { amount: 1 }, reseller: 'deny' },
  {
    method: 'PATCH',
    path: '/api/team/{subadmin}/subscription',
    body: { extend_days: 1 },
    reseller: 'deny',
    admin: false,
  },
  { method: 'POST', path: '/api/team/{member}/password', body: { password: 'other-pass-123' }, reseller: 'deny' },
  { method: 'PATCH', path: '/api/team/{member}/webhook', body: { webhook: '' }, reseller: 'deny' },
  { method: 'PATCH', path: '/api/account/webhook', body: { webhook: '' }, reseller: 'deny', rival: 'allowed' },
  { method: 'DELETE', path: '/api/team/{member}/2fa', reseller: 'deny', admin: false },
  { method: 'POST', path: '/api/auth/2fa/setup', reseller: 'allow', rival: 'allowed' },
  {
    method: 'POST',
    path: '/api/tokens',
    body: { name: 'matrix', scopes: ['apps:read'] },
    reseller: 'allow',
    rival: 'allowed',
  },
  { method: 'GET', path: '/api/tokens', reseller: 'allow', rival: 'allowed' },
  { method: 'GET', path: '/api/account/security', reseller: 'allow', rival: 'allowed' },
  {
    method: 'PATCH',
    path: '/api/account/security',
    body: { require_two_factor: false },
    reseller: 'deny',
    admin: false,
    rival: 'allowed',
  },
  { method: 'DELETE', path: '/api/account/sessions', reseller: 'allow', rival: 'allowed' },
  { method: 'GET', path: '/api/account/sign-ins', reseller: 'allow', rival: 'allowed' },
  { method: 'GET', path: '/api/audit', reseller: 'allow', rival: 'allowed' },
  { method: 'GET', path: '/api/account/webhook/deliveries', reseller: 'allow', rival: 'allowed' },
  { method: 'POST', path: '/api/apps/{app}/releases', body: { version: '2.0.0-RANDOM' }, reseller: 'deny' },
  { method: 'GET', path: '/api/apps/{app}/releases', reseller: 'allow' },
  { method: 'GET', path: '/api/releases/{release}', reseller: 'allow' },
  { method: 'PATCH', path: '/api/releases/{release}', body: { notes: 'matrix' }, reseller: 'deny' },
  { method: 'DELETE', path: '/api/releases/{release}', reseller: 'deny' },
  { method: 'POST', path: '/api/releases/{release}/publish', reseller: 'deny' },
  { method: 'POST', path: '/api/releases/{release}/yank', reseller: 'deny' },
  { method: 'PUT', path: '/api/releases/{release}/artifacts/{file}', body: { matrix: true }, reseller: 'deny' },
  { method: 'GET', path: '/api/releases/{release}/artifacts/{file}', reseller: 'allow' },
  { method: 'DELETE', path: '/api/releases/{release}/artifacts/{file}', reseller: 'deny' },
];

/** Routes outside the matrix, and why. */
const EXCLUDED: Record<string, string> = {
  'POST /api/auth/login': 'public; tested in auth.test.ts',
  'POST /api/auth/logout': 'ends the session the matrix uses; tested in auth.test.ts',
  'POST /api/auth/password': 'changes the caller’s own password; tested in auth.test.ts',
  'GET /api/ws': 'WebSocket; tested in live.test.ts',
  'POST /api/auth/2fa/enable': 'needs a code of the caller’s own pending secret; tested in two-factor.test.ts',
  'POST /api/auth/2fa/disable': 'needs the caller’s two-factor on; tested in two-factor.test.ts',
  'DELETE /api/tokens/{id}': 'who may revoke depends on whose token it is; tested in api-tokens.test.ts',
  'DELETE /api/account/sessions/{id}': 'ends one of the caller’s own sessions; tested in account-security.test.ts',
  'GET /api/apps/{id}/events': 'SSE; tested in live.test.ts',
  'GET /api/jobs/{id}': 'whose job it is decides; tested in jobs/jobs.test.ts',
  'POST /api/jobs/{id}/cancel': 'whose job it is decides; tested in jobs/jobs.test.ts',
  'POST /api/webhook-deliveries/{id}/redeliver': 'whose delivery it is decides; tested in notify/deliveries.test.ts',
  'GET /api/products/{id}': 'managers only (a reseller gets 403); tested in commerce/fulfil.test.ts',
  'PATCH /api/products/{id}': 'managers only (a reseller gets 403); tested in commerce/fulfil.test.ts',
  'DELETE /api/products/{id}': 'managers only (a reseller gets 403); tested in commerce/fulfil.test.ts',
  'POST /api/products/{id}/rotate-secret': 'managers only (a reseller gets 403); tested in commerce/fulfil.test.ts',
};

beforeAll(async () => {
  t = await startTestServer({
    DEVELOPER_EMAILS: 'dev@matrix.test',
    DEVELOPER_USERNAME: 'matrixdev',
    DEVELOPER_PASSWORD: 'dev-pass-123',
  });
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  developer = await new Api(t.base).signIn('matrixdev', 'dev-pass-123');
  await createAccount(t, { username: 'rivalowner', password: 'rival-pass-1' });
  rival = await new Api(t.base).signIn('rivalowner', 'rival-pass-1');
  adminId = (await owner.post('/api/team', { username: 'matrixadmin', password: 'admin-pass-1', role: 'admin' })).body
    .id;
  admin = await new Api(t.base).signIn('matrixadmin', 'admin-pass-1');
  resellerId = (await admin.post('/api/team', { username: 'matrixseller', password: 'seller-pass-1' })).body.id;
  reseller = await new Api(t.base).signIn('matrixseller', 'seller-pass-1');
  appId = await make.app();
  // Offline files on (docs/protocol.md 12.5), so POST /api/licenses/{id}/offline can answer 200.
  await owner.patch(`/apps/${appId}`, { offline_days: 7 });
});
afterAll(() => t.close());

async function attempt(row: Row, who: Who): Promise<{ status: number; body: any }> {
  let path = row.path;
  for (const m of row.path.matchAll(/\{(\w+)\}/g)) path = path.replace(m[0], await make[m[1] as Param]());
  const body = row.makeBody
    ? await row.makeBody(path)
    : JSON.parse(
        JSON.stringify(row.body ?? null)?.replace('RANDOM', `n${Math.random().toString(36).slice(2, 10)}`) ?? 'null',
      );
  const api = { owner, admin, reseller, 'reseller+perm': reseller, developer, rival, anonymous: owner.as(undefined) }[
    who
  ];
  return api.call(row.method, path + (row.query ?? ''), body ?? undefined, who === 'anonymous' ? { token: '' } : {});
}

async function setResellerPermissions(grant: PermissionKey | null) {
  const permissions = Object.fromEntries(PERMISSION_KEYS.map((k) => [k, k === grant]));
  await sql('update accounts set permissions = ?::jsonb where id = ?', [JSON.stringify(permissions), resellerId]);
}

describe('authorization matrix', () => {
  it('covers every dashboard route', () => {
    const declared = t.server.app.router.routes
      .filter((r) => r.doc.auth === 'dashboard')
      .map((r) => `${r.method.toUpperCase()} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    const covered = new Set(ROWS.map((r) => `${r.method} ${r.path.replace(/\{\w+\}/g, '{id}')}`));
    for (const d of declared) {
      const norm = d.replace(/\{\w+\}/g, '{id}');
      if (EXCLUDED[d]) continue;
      expect(covered.has(norm), `no matrix row for ${d}`).toBe(true);
    }
  });

  for (const row of ROWS) {
    it(`${row.method} ${row.path}`, async () => {
      const ok = (r: { status: number }, who: string) =>
        expect(r.status, `${who}: ${JSON.stringify(r)}`).toBeLessThan(300);
      const denied = (r: { status: number }, who: string, statuses = [403]) =>
        expect(statuses, `${who}: ${JSON.stringify(r)}`).toContain(r.status);

      expect((await attempt(row, 'anonymous')).status).toBe(401);
      ok(await attempt(row, 'owner'), 'owner');
      ok(await attempt(row, 'developer'), 'developer');
      const a = await attempt(row, 'admin');
      if (row.admin === false) denied(a, 'admin');
      else ok(a, 'admin');

      await setResellerPermissions(null);
      const bare = await attempt(row, 'reseller');
      if (row.reseller === 'allow') ok(bare, 'reseller');
      else denied(bare, 'reseller without permission');
      if (row.reseller !== 'allow' && row.reseller !== 'deny') {
        await setResellerPermissions(row.reseller);
        ok(await attempt(row, 'reseller+perm'), `reseller with ${row.reseller}`);
        await setResellerPermissions(null);
      }

      const r = await attempt(row, 'rival');
      if (row.rival === 'allowed') ok(r, 'second owner');
      else denied(r, 'second owner', [404]);
    });
  }

  it('hides api_secret from resellers and shows a second owner nothing of ours', async () => {
    const seen = await reseller.get(`/api/apps/${appId}`);
    expect(seen.body.api_key).toBeDefined();
    expect(seen.body.api_secret).toBeUndefined();
    expect((await owner.get(`/api/apps/${appId}`)).body.api_secret).toBeDefined();
    expect((await rival.get('/api/apps')).body.map((x: { id: string }) => x.id)).not.toContain(appId);
    const rivalTeam = (await rival.get('/api/team')).body.map((m: { id: string }) => m.id);
    expect(rivalTeam).not.toContain(adminId);
    expect(rivalTeam).not.toContain(resellerId);
    expect((await reseller.get('/api/team')).body).toEqual([]);
  });
});
