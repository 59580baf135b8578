// API tokens (docs/protocol.md 13.1) against a real server: creation (shown once, stored as a keyed hash),
// listing with last use, revocation (own; an owner also its tree's), scopes and app_ids narrowing
// the account's rights as they are at each call, the 401 and 403 texts, tokens only in the
// Authorization header (never a query string or a cookie), live streams, the per-token rate limit,
// and the actor of what a token did.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

const SCOPE_DENIED = { detail: 'Token scope does not allow this action' };
const INVALID = { detail: 'Invalid or expired token' };

let t: TestServer;
let owner: Api;
let appA: string;
let appB: string;
let rivalApp: string;
let resellerId: string;
let reseller: Api;

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return t.server.services.sql.all<T>(text, params);
}

async function token(api: Api, body: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const r = await api.post('/api/tokens', { name: 'test', ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appA = (await owner.post('/api/apps', { name: 'Token A' })).body.id;
  appB = (await owner.post('/api/apps', { name: 'Token B' })).body.id;
  await createAccount(t, { username: 'tokrival', password: 'rival-pass-1' });
  const rival = await new Api(t.base).signIn('tokrival', 'rival-pass-1');
  rivalApp = (await rival.post('/api/apps', { name: 'Rival' })).body.id;
  resellerId = (
    await owner.post('/api/team', {
      username: 'tokseller',
      password: 'seller-pass-1',
      allowed_apps: [appA, appB],
      permissions: { view_keys: true },
    })
  ).body.id;
  reseller = await new Api(t.base).signIn('tokseller', 'seller-pass-1');
});
afterAll(() => t.close());

describe('creating, listing and revoking', () => {
  it('answers 201 with the token once; stores only its keyed hash; lists last use without it', async () => {
    const r = await owner.post('/api/tokens', {
      name: 'ci',
      scopes: ['apps:read', 'licenses:write', 'apps:read'],
      app_ids: [appA],
      expires_at: '2099-01-01T00:00:00.000Z',
    });
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(
      ['app_ids', 'created_at', 'expires_at', 'id', 'name', 'scopes', 'token'].sort(),
    );
    expect(r.body).toMatchObject({
      name: 'ci',
      scopes: ['apps:read', 'licenses:write'],
      app_ids: [appA],
      expires_at: '2099-01-01T00:00:00.000Z',
    });
    expect(r.body.token).toMatch(/^kwt_[A-Za-z0-9_-]{43}$/);
    const stored = JSON.stringify(await sql('select * from api_tokens'));
    expect(stored).not.toContain(r.body.token);
    expect(stored).not.toContain(r.body.token.slice(4));

    const before = (await owner.get('/api/tokens')).body.find((x: { id: string }) => x.id === r.body.id);
    expect(before).toMatchObject({ name: 'ci', last_used_at: null, last_used_ip: null });
    expect(before.token).toBeUndefined();
    expect((await owner.get('/api/apps', { token: r.body.token })).status).toBe(200);
    const after = (await owner.get('/api/tokens')).body.find((x: { id: string }) => x.id === r.body.id);
    expect(after.last_used_ip).toBe('127.0.0.1');
    expect(Date.parse(after.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('refuses unknown scopes, a bad expiry and applications the caller does not reach (422)', async () => {
    const bad = async (body: Record<string, unknown>) => (await owner.post('/api/tokens', body)).status;
    expect(await bad({ name: 'x', scopes: ['apps:admin'] })).toBe(422);
    expect(await bad({ name: 'x', scopes: [] })).toBe(422);
    expect(await bad({ name: '', scopes: ['apps:read'] })).toBe(422);
    expect(await bad({ name: 'x'.repeat(101), scopes: ['apps:read'] })).toBe(422);
    expect(await bad({ name: 'x', scopes: ['apps:read'], expires_at: 'tomorrow' })).toBe(422);
    expect(await bad({ name: 'x', scopes: ['apps:read'], expires_at: '2001-01-01T00:00:00Z' })).toBe(422);
    const foreign = await owner.post('/api/tokens', { name: 'x', scopes: ['apps:read'], app_ids: [rivalApp] });
    expect(foreign.status).toBe(422);
    expect(foreign.body.detail[0].loc).toEqual(['body', 'app_ids', 0]);
  });

  it('revokes: the caller its own, an owner any of its tree; others get 404', async () => {
    const mine = await token(reseller, { scopes: ['apps:read'] });
    const ownerTok = await token(owner, { scopes: ['apps:read'] });
    expect((await reseller.delete(`/api/tokens/${ownerTok.id}`)).status).toBe(404);
    const rival = await new Api(t.base).signIn('tokrival', 'rival-pass-1');
    expect((await rival.delete(`/api/tokens/${mine.id}`)).body).toEqual({ detail: 'Token not found' });
    expect((await owner.delete(`/api/tokens/${mine.id}`)).status).toBe(200);
    expect((await reseller.get('/api/apps', { token: mine.token })).body).toEqual(INVALID);
    expect((await owner.delete(`/api/tokens/${ownerTok.id}`)).status).toBe(200);
    expect((await owner.get('/api/apps', { token: ownerTok.token })).status).toBe(401);
    const audit = (await owner.get('/api/audit?action=token.revoke')).body;
    expect(audit[1]).toMatchObject({ actor: { username: 'owner' }, detail: `Token "test" (${mine.id}) revoked` });
  });
});

describe('what a token reaches', () => {
  it('answers 401 Invalid or expired token for unknown, malformed, expired, disabled and deleted', async () => {
    const api = new Api(t.base);
    expect((await api.get('/api/apps', { token: 'kwt_' + 'A'.repeat(43) })).body).toEqual(INVALID);
    expect((await api.get('/api/apps', { token: 'kwt_short' })).body).toEqual(INVALID);
    const expiring = await token(owner, { scopes: ['apps:read'] });
    await sql("update api_tokens set expires_at = now() - interval '1 second' where id = ?", [expiring.id]);
    const expired = await api.get('/api/apps', { token: expiring.token });
    expect([expired.status, expired.body]).toEqual([401, INVALID]);

    const member = (await owner.post('/api/team', { username: 'tokgone', password: 'gone-pass-1' })).body;
    const m = await new Api(t.base).signIn('tokgone', 'gone-pass-1');
    const tok = await token(m, { scopes: ['apps:read'] });
    expect((await api.get('/api/apps', { token: tok.token })).status).toBe(200);
    await owner.patch(`/api/team/${member.id}`, { enabled: false });
    expect((await api.get('/api/apps', { token: tok.token })).body).toEqual(INVALID);
    await owner.patch(`/api/team/${member.id}`, { enabled: true });
    expect((await api.get('/api/apps', { token: tok.token })).status).toBe(200);
    await owner.delete(`/api/team/${member.id}`);
    expect((await api.get('/api/apps', { token: tok.token })).body).toEqual(INVALID);
  });

  it('keeps to its scopes, and never reaches /api/auth, /api/tokens or /api/account', async () => {
    const tok = (await token(owner, { scopes: ['apps:read', 'logs:read'] })).token;
    const as = owner.as(tok);
    expect((await as.get(`/api/apps/${appA}`)).status).toBe(200);
    expect((await as.get(`/api/apps/${appA}/logs`)).status).toBe(200);
    expect((await as.get('/api/audit')).status).toBe(200);
    for (const [method, path, body] of [
      ['PATCH', `/api/apps/${appA}`, { name: 'renamed' }],
      ['GET', `/api/apps/${appA}/licenses`, undefined],
      ['GET', `/api/apps/${appA}/users`, undefined],
      ['GET', '/api/team', undefined],
      ['GET', '/api/auth/me', undefined],
      ['POST', '/api/auth/logout', {}],
      ['GET', '/api/tokens', undefined],
      ['POST', '/api/tokens', { name: 'more', scopes: ['apps:read'] }],
      ['GET', '/api/account/security', undefined],
      ['PATCH', '/api/account/webhook', { webhook: '' }],
    ] as const) {
      const r = await as.call(method, path, body);
      expect([method, path, r.status, r.body]).toEqual([method, path, 403, SCOPE_DENIED]);
    }
    expect((await owner.get(`/api/apps/${appA}`)).body.name).toBe('Token A');
  });

  it('keeps to its app_ids: other apps answer 403 and listings show only its apps', async () => {
    const tok = (await token(owner, { scopes: ['apps:read', 'licenses:read', 'licenses:write'], app_ids: [appA] }))
      .token;
    const as = owner.as(tok);
    expect((await as.get('/api/apps')).body.map((a: { id: string }) => a.id)).toEqual([appA]);
    expect((await as.get(`/api/apps/${appA}/licenses`)).status).toBe(200);
    expect((await as.get(`/api/apps/${appB}`)).body).toEqual(SCOPE_DENIED);
    expect((await as.get(`/api/apps/${appB}/licenses`)).body).toEqual(SCOPE_DENIED);
    const [keyB] = (await owner.post(`/api/apps/${appB}/licenses`, { amount: 1, duration: 1 })).body;
    const reset = await as.post(`/api/licenses/${keyB.id}/reset-hwid`);
    expect([reset.status, reset.body]).toEqual([403, SCOPE_DENIED]);
    // Another owner's app does not exist for this tree, app_ids or not (docs/protocol.md 11.36).
    const rivals = await as.get(`/api/apps/${rivalApp}`);
    expect([rivals.status, rivals.body]).toEqual([404, { detail: 'Application not found' }]);
    const [keyA] = (await as.post(`/api/apps/${appA}/licenses`, { amount: 1, duration: 1 })).body;
    expect(keyA.key).toBeDefined();
  });

  it("follows its account's rights as they are at each call: a reseller's token never exceeds the reseller", async () => {
    const tok = (await token(reseller, { scopes: ['licenses:read', 'licenses:write', 'apps:read'] })).token;
    const as = owner.as(tok);
    expect((await as.get(`/api/apps/${appA}/licenses`)).status).toBe(200);
    const gen = await as.post(`/api/apps/${appA}/licenses`, { amount: 1, duration: 1 });
    expect([gen.status, gen.body]).toEqual([403, { detail: 'Permission denied' }]);
    await owner.patch(`/api/team/${resellerId}/permissions`, { permissions: {} });
    expect((await as.get(`/api/apps/${appA}/licenses`)).body).toEqual({ detail: 'Permission denied' });
    await owner.patch(`/api/team/${resellerId}/apps`, [appB]);
    expect((await as.get(`/api/apps/${appA}`)).status).toBe(404);
    expect((await as.get('/api/apps')).body.map((a: { id: string }) => a.id)).toEqual([appB]);
    expect((await as.get(`/api/apps/${appA}/credentials`)).status).toBe(404);
  });
});

describe('tokens only in the Authorization header', () => {
  it('refuses a token in a query string (401), on its own or beside a valid header', async () => {
    const tok = (await token(owner, { scopes: ['apps:read', 'logs:read'] })).token;
    const api = new Api(t.base);
    const alone = await api.get(`/api/apps?token=${tok}`, { token: '' });
    expect([alone.status, alone.body]).toEqual([401, INVALID]);
    const beside = await api.get(`/api/apps/${appA}/logs?limit=1&access_token=${tok}`, { token: tok });
    expect([beside.status, beside.body]).toEqual([401, INVALID]);
    const sse = await fetch(`${t.base}/api/apps/${appA}/events?token=${tok}`);
    expect(sse.status).toBe(401);
    expect(await sse.json()).toEqual(INVALID);
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${t.base.replace('http', 'ws')}/api/ws?token=${tok}`);
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('open', () => reject(new Error('the upgrade was accepted')));
      ws.once('error', () => undefined);
    });
    expect(status).toBe(401);
  });

  it('does not take one from the kw_session cookie', async () => {
    const tok = (await token(owner, { scopes: ['apps:read'] })).token;
    const r = await new Api(t.base).get('/api/apps', { token: '', headers: { cookie: `kw_session=${tok}` } });
    expect([r.status, r.body]).toEqual([401, { detail: 'Not authenticated' }]);
  });

  it('opens live streams with logs:read only, and limited to its app_ids', async () => {
    const without = (await token(owner, { scopes: ['apps:read'] })).token;
    await expect(Subscriber.open(t.base, without)).rejects.toThrow(/403 .*Token scope does not allow this action/);
    const withLogs = (await token(owner, { scopes: ['logs:read'], app_ids: [appA] })).token;
    const ws = await Subscriber.open(t.base, withLogs);
    expect((await ws.subscribe(appA)).type).toBe('subscribed');
    expect(await ws.subscribe(appB)).toMatchObject({ type: 'error', detail: SCOPE_DENIED.detail });
    ws.ws.close();
    const sse = await fetch(`${t.base}/api/apps/${appB}/events`, { headers: { authorization: `Bearer ${withLogs}` } });
    expect(sse.status).toBe(403);
  });
});

describe('rate limit and audit', () => {
  it('allows 600 calls a minute per token, then 429 Rate limit exceeded with Retry-After', async () => {
    const tok = (await token(owner, { scopes: ['apps:read'] })).token;
    const other = (await token(owner, { scopes: ['apps:read'] })).token;
    const api = owner.as(tok);
    let ok = 0;
    for (let batch = 0; batch < 12; batch++) {
      const rs = await Promise.all(Array.from({ length: 50 }, () => api.get(`/api/apps/${appA}`)));
      ok += rs.filter((r) => r.status === 200).length;
    }
    expect(ok).toBe(600);
    const over = await api.get(`/api/apps/${appA}`);
    expect([over.status, over.body]).toEqual([429, { detail: 'Rate limit exceeded' }]);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await owner.get(`/api/apps/${appA}`, { token: other })).status).toBe(200); // per token
    expect((await owner.get(`/api/apps/${appA}`)).status).toBe(200); // and not the session's
  });

  it('records the acting account and the token on what a token did, and never the token', async () => {
    const tok = await token(owner, { name: 'banbot', scopes: ['apps:write', 'logs:read'] });
    const ban = await owner.post(
      `/api/apps/${appA}/bans`,
      { type: 'hwid', value: 'bot-banned-hwid' },
      { token: tok.token },
    );
    expect(ban.status).toBe(200);
    await owner.post(`/api/apps/${appA}/bans`, { type: 'hwid', value: 'by-hand-hwid' });
    const logs = (await owner.get(`/api/apps/${appA}/logs?action=blacklist.add`)).body;
    const owners = (await sql<{ id: string }>("select id from accounts where username = 'owner'"))[0]!;
    expect(logs[0].actor).toEqual({ id: owners.id, username: 'owner', role: 'owner' });
    expect(logs[1].actor).toEqual({ id: owners.id, username: 'owner', role: 'owner', token_id: tok.id });
    const created = (await owner.get('/api/audit?action=token.create')).body;
    expect(created[0].detail).toContain(`"banbot" (${tok.id})`);
    const everything = JSON.stringify(await sql('select * from audit_log'));
    expect(everything).not.toContain(tok.token);
    expect(everything).not.toContain(tok.token.slice(4));
    const metrics = await (await fetch(`${t.base}/metrics`)).text();
    expect(metrics).not.toContain(tok.token.slice(4));
  });
});
