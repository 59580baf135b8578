// A reseller's API token never exceeds the reseller (docs/protocol.md 13.1), as a property: for random
// permission sets of the reseller and random token scopes and app_ids, every dashboard route of the
// router's own table is called with the token and (where the token may) with the reseller's own
// session, on fresh records. Outside its scopes the token gets exactly 403 `Token scope does not
// allow this action`; on a record of an application outside its app_ids, a 403; inside both, the
// very answer the reseller's session gets: never more. The scope map itself is checked against
// every route's tag, so a new route cannot slip past it.
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';
import { PERMISSION_KEYS } from '../../../src/platform/db/entities/index.js';
import { routeScope, TOKEN_SCOPES } from '../../../src/modules/access/index.js';

const SCOPE_DENIED = { detail: 'Token scope does not allow this action' };

let t: TestServer;
let owner: Api;
let reseller: Api;
let resellerId: string;
let appA: string;
let appB: string;

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return t.server.services.sql.all<T>(text, params);
}

const unique = () => Math.random().toString(36).slice(2, 10);

/** Fresh records in the reseller's scope, inside appA: destructive routes never see each other's leftovers. */
const make = {
  async license(): Promise<string> {
    const [k] = (await owner.post(`/api/apps/${appA}/licenses`, { amount: 1, duration: 5 })).body;
    await sql(
      `update license_keys set reseller_id = ?, status = 'used', used_by = 'license-only',
       expires_at = now() + interval '5 days' where id = ?`,
      [resellerId, k.id],
    );
    return k.id;
  },
  async user(): Promise<string> {
    const lic = await make.license();
    const [row] = await sql<{ id: string }>(
      `insert into end_users (id, app_id, username, password_hash, created_at, level, reseller_id, license_id)
       values (gen_random_uuid(), ?, ?, 'x', now(), 1, ?, ?) returning id`,
      [appA, `u${unique()}`, resellerId, lic],
    );
    return row!.id;
  },
  async ban(): Promise<string> {
    return (await owner.post(`/api/apps/${appA}/bans`, { type: 'hwid', value: `prop-${unique()}` })).body.id;
  },
  async product(): Promise<string> {
    return (await owner.post(`/api/apps/${appA}/products`, { name: `p${unique()}`, duration: 30 })).body.id;
  },
  async release(): Promise<string> {
    return (await owner.post(`/api/apps/${appA}/releases`, { version: `1.0.0-p${unique()}` })).body.id;
  },
  async member(): Promise<string> {
    return (await owner.post('/api/team', { username: `pm${unique()}`, password: 'member-pass-1' })).body.id;
  },
};

/** The record a route's `:id` names, by the path it sits in. */
async function fill(pattern: string): Promise<string> {
  let path = pattern;
  const id = /^\/api\/apps\/:id/.test(pattern)
    ? appA
    : /^\/api\/licenses\/:id/.test(pattern)
      ? await make.license()
      : /^\/api\/users\/:id/.test(pattern)
        ? await make.user()
        : /^\/api\/bans\/:id/.test(pattern)
          ? await make.ban()
          : /^\/api\/products\/:id/.test(pattern)
            ? await make.product()
            : /^\/api\/team\/:id/.test(pattern)
              ? await make.member()
              : /^\/api\/releases\/:id/.test(pattern)
                ? await make.release()
                : randomUUID();
  path = path.replace(':id', id).replace(':lang', 'python');
  return path.replace(/:[A-Za-z_]+/g, () => randomUUID());
}

/** A body each write accepts when the caller may make it (unknown routes get {}: both callers then agree). */
function bodyFor(method: string, pattern: string): unknown {
  const bodies: Record<string, () => unknown> = {
    'post /api/apps': () => ({ name: 'prop' }),
    'patch /api/apps/:id': () => ({ keys_paused: false }),
    'put /api/apps/:id/hashes': () => ({ hashes: [] }),
    'post /api/apps/:id/notice': () => ({ message: 'prop notice' }),
    'post /api/apps/:id/licenses': () => ({ amount: 1, duration: 1 }),
    'post /api/apps/:id/bans': () => ({ type: 'hwid', value: `prop-${unique()}` }),
    'post /api/licenses/:id/extend': () => ({ value: 1, unit: 'days' }),
    'post /api/apps/:id/licenses/extend-all': () => ({ value: 1, unit: 'days' }),
    'patch /api/licenses/:id/ban': () => ({}),
    'patch /api/licenses/:id': () => ({ note: 'prop', max_sessions: 2 }),
    'post /api/licenses/:id/offline': () => ({ hwid: 'prop-device-0001' }),
    'put /api/apps/:id/entitlements': () => ({ entitlements: [] }),
    'patch /api/users/:id/ban': () => ({ banned: true }),
    'post /api/team': () => ({ username: `pn${unique()}`, password: 'member-pass-1' }),
    'patch /api/team/:id': () => ({ enabled: true }),
    'patch /api/team/:id/permissions': () => ({ permissions: {} }),
    'patch /api/team/:id/apps': () => [],
    'post /api/team/:id/credits': () => ({ amount: 1 }),
    'patch /api/team/:id/subscription': () => ({ extend_days: 1 }),
    'post /api/team/:id/password': () => ({ password: 'other-pass-123' }),
    'patch /api/team/:id/webhook': () => ({ webhook: '' }),
    'patch /api/account/webhook': () => ({ webhook: '' }),
  };
  const make = bodies[`${method} ${pattern}`];
  if (make) return make();
  return method === 'get' || method === 'delete' ? undefined : {};
}

/** Routes whose records live in an application (its id in the path, or a key, user, ban or product of it). */
const TOUCHES_APP = /^\/api\/(apps\/:id|licenses|users|bans|products|releases)(\/|$)/;

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appA = (await owner.post('/api/apps', { name: 'Prop A' })).body.id;
  appB = (await owner.post('/api/apps', { name: 'Prop B' })).body.id;
  resellerId = (
    await owner.post('/api/team', { username: 'propseller', password: 'seller-pass-1', allowed_apps: [appA, appB] })
  ).body.id;
  reseller = await new Api(t.base).signIn('propseller', 'seller-pass-1');
}, 120_000);
afterAll(() => t.close());

function dashboardRoutes() {
  return t.server.app.router.routes.filter((r) => r.doc.auth === 'dashboard');
}

describe('the scope map', () => {
  it("gives every route of the router's table the scope its tag names (account routes none)", () => {
    const byTag: Record<string, (method: string, path: string) => string | null> = {
      apps: (m, p) => (/\/logs(\/|$)/.test(p) ? 'logs:read' : m === 'get' ? 'apps:read' : 'apps:write'),
      blacklist: (m) => (m === 'get' ? 'apps:read' : 'apps:write'),
      licenses: (m) => (m === 'get' ? 'licenses:read' : 'licenses:write'),
      users: (m) => (m === 'get' ? 'users:read' : 'users:write'),
      live: () => 'logs:read',
      audit: () => 'logs:read',
      team: (m, p) => (p.startsWith('/api/account') ? null : m === 'get' ? 'team:read' : 'team:write'),
      auth: () => null,
      tokens: () => null,
      account: () => null,
      releases: (m) => (m === 'get' ? 'releases:read' : 'releases:write'),
    };
    const routes = dashboardRoutes();
    expect(routes.length).toBeGreaterThan(40);
    for (const r of routes) {
      const expected = byTag[r.doc.tag];
      expect(expected, `a scope rule for the tag "${r.doc.tag}" of ${r.path}`).toBeDefined();
      for (const path of r.unprefixed ? [r.path, r.path.replace(/^\/api/, '')] : [r.path])
        expect([r.method, path, routeScope(r.method, path)]).toEqual([r.method, path, expected!(r.method, r.path)]);
    }
  });
});

describe("a reseller's token never exceeds the reseller", () => {
  it('holds for random permissions, scopes and app_ids on every route', async () => {
    const routes = dashboardRoutes().filter((r) => !r.docOnly);
    await fc.assert(
      fc.asyncProperty(
        fc.subarray([...PERMISSION_KEYS]),
        fc.subarray([...TOKEN_SCOPES], { minLength: 1 }),
        fc.constantFrom<'all' | 'A' | 'B'>('all', 'A', 'B'),
        async (granted, scopes, only) => {
          const permissions = Object.fromEntries(PERMISSION_KEYS.map((k) => [k, granted.includes(k)]));
          await sql('update accounts set permissions = ?::jsonb where id = ?', [
            JSON.stringify(permissions),
            resellerId,
          ]);
          const appIds = only === 'all' ? null : [only === 'A' ? appA : appB];
          const created = await reseller.post('/api/tokens', { name: 'prop', scopes, app_ids: appIds });
          expect(created.status).toBe(201);
          const asToken = reseller.as(created.body.token);
          for (const r of routes) {
            const scope = routeScope(r.method, r.path);
            const label = `${r.method.toUpperCase()} ${r.path} with [${scopes}] apps ${only} perms [${granted}]`;
            const viaToken = await asToken.call(r.method.toUpperCase(), await fill(r.path), bodyFor(r.method, r.path));
            if (scope === null || !scopes.includes(scope)) {
              expect([label, viaToken.status, viaToken.body]).toEqual([label, 403, SCOPE_DENIED]);
              continue;
            }
            if (TOUCHES_APP.test(r.path) && only === 'B') {
              expect([label, viaToken.status]).toEqual([label, 403]);
              continue;
            }
            const viaSession = await reseller.call(
              r.method.toUpperCase(),
              await fill(r.path),
              bodyFor(r.method, r.path),
            );
            expect([label, viaToken.status]).toEqual([label, viaSession.status]);
          }
          await reseller.delete(`/api/tokens/${created.body.id}`);
        },
      ),
      { numRuns: 10 },
    );
  }, 240_000);
});
