// The dashboard reads API answers through the shapes in web/src/api/responses.ts (OpenAPI types
// requests only). This checks real answers of a real server against those shapes, for an owner
// and for a reseller who may see little, so a field the server renames or drops fails here
// instead of leaving a blank cell in the browser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { FormatRegistry, Type } from '@sinclair/typebox';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { Api } from '../helpers/http.js';
import {
  AccountSchema,
  ApiTokenSchema,
  AppSchema,
  AuditEntrySchema,
  BanSchema,
  CreatedTokenSchema,
  CredentialsSchema,
  EndUserSchema,
  ExtendAllSchema,
  GeneratedSchema,
  ImportResultSchema,
  LicensePageSchema,
  LicenseSchema,
  LiveFrameSchema,
  LoginSchema,
  LogEntrySchema,
  MeSchema,
  OfflineActivationSchema,
  RecoveryCodesSchema,
  SeatPoolSchema,
  SecurityStateSchema,
  SignInSchema,
  OverviewSchema,
  StatsSchema,
  TeamDeleteSchema,
  TimeseriesSchema,
  TwoFactorSetupSchema,
} from '../../web/src/api/responses.js';
import { totp } from '../helpers/totp.js';
import { activationRequest } from '../modules/airgap/airgap-harness.js';

// docs/protocol.md 1: timestamps are ISO 8601 UTC with milliseconds.
if (!FormatRegistry.Has('date-time'))
  FormatRegistry.Set('date-time', (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(v));

function conforms(schema: TSchema, value: unknown, what: string): void {
  const errors = [...Value.Errors(schema, value)]
    .slice(0, 5)
    .map((e) => `${e.path || '/'}: ${e.message} (got ${JSON.stringify(e.value)?.slice(0, 60)})`);
  expect(errors, `${what} does not match web/src/api/responses.ts`).toEqual([]);
}

describe("API answers match the dashboard's response types", () => {
  let t: TestServer;
  let f: AppFixture;
  let reseller: Api;

  beforeAll(async () => {
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t, { key_costs: { 'days:30': 5 } });
    const keys = await f.keys(3, { note: 'contract' });
    const c = f.client();
    const s = await f.session(c);
    expect(
      (
        await c.post('/api/client/register', {
          session: s,
          username: 'contract-user',
          password: 'pw-123456',
          license: keys[0],
          hwid: 'contract-dev-01',
        })
      ).status,
    ).toBe(200);
    await f.owner.post(`/apps/${f.app.id}/bans`, { type: 'ip', value: '203.0.113.50' });
    expect(
      (
        await f.owner.post('/api/team', {
          username: 'contract-seller',
          password: 'seller-pass-1',
          allowed_apps: [f.app.id],
          key_quota: 100,
          permissions: {
            view_keys: true,
            view_auth_logs: true,
            view_blocked_ips: true,
            view_stats: true,
            generate_keys: true,
          },
        })
      ).status,
    ).toBe(200);
    reseller = await new Api(t.base).signIn('contract-seller', 'seller-pass-1');
    expect((await reseller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 30 })).status).toBe(200);
  }, 60_000);
  afterAll(() => t?.close());

  it('for the owner, who sees every field', async () => {
    const o = f.owner;
    const id = f.app.id;
    conforms(
      LoginSchema,
      (await new Api(t.base).post('/api/auth/login', { username: 'owner', password: 'owner-pass-1' })).body,
      'POST /api/auth/login',
    );
    conforms(MeSchema, (await o.get('/api/auth/me')).body, 'GET /api/auth/me');
    conforms(Type.Array(AppSchema), (await o.get('/api/apps')).body, 'GET /api/apps');
    conforms(AppSchema, (await o.get(`/api/apps/${id}`)).body, 'GET /api/apps/{id}');
    conforms(CredentialsSchema, (await o.get(`/api/apps/${id}/credentials`)).body, 'GET /api/apps/{id}/credentials');
    conforms(StatsSchema, (await o.get(`/api/apps/${id}/stats`)).body, 'GET /api/apps/{id}/stats');
    conforms(
      TimeseriesSchema,
      (await o.get(`/api/apps/${id}/timeseries?metric=beats&bucket=hour`)).body,
      'GET /api/apps/{id}/timeseries',
    );
    conforms(OverviewSchema, (await o.get('/api/overview')).body, 'GET /api/overview');
    const page = (await o.get(`/api/apps/${id}/licenses?limit=2`)).body;
    conforms(LicensePageSchema, page, 'GET /api/apps/{id}/licenses');
    expect(page.next_cursor).toEqual(expect.any(String));
    conforms(
      GeneratedSchema,
      (await o.post(`/apps/${id}/licenses`, { amount: 1, unit: 'lifetime' })).body,
      'POST /apps/{id}/licenses',
    );
    const used =
      page.items.find((l: { status: string }) => l.status === 'used') ??
      (await o.get(`/api/apps/${id}/licenses?status=used`)).body.items[0];
    conforms(
      LicenseSchema,
      (await o.post(`/licenses/${used.id}/extend`, { value: 1, unit: 'days' })).body,
      'POST /licenses/{id}/extend',
    );
    conforms(
      LicenseSchema,
      (await o.patch(`/licenses/${used.id}/ban`, { banned: false })).body,
      'PATCH /licenses/{id}/ban',
    );
    conforms(
      ImportResultSchema,
      (await o.post(`/api/apps/${id}/licenses/import?dry_run=true`, { format: 'list', keys: [{ key: 'CONTRACT-1' }] }))
        .body,
      'POST /api/apps/{id}/licenses/import',
    );
    conforms(
      LicenseSchema,
      (await o.patch(`/api/licenses/${used.id}`, { level: 2, note: 'contract', max_sessions: 0 })).body,
      'PATCH /api/licenses/{id}',
    );
    conforms(
      ExtendAllSchema,
      (await o.post(`/apps/${id}/licenses/extend-all`, { value: 1, unit: 'hours' })).body,
      'POST /apps/{id}/licenses/extend-all',
    );
    const users = (await o.get(`/api/apps/${id}/users`)).body;
    conforms(Type.Array(EndUserSchema), users, 'GET /api/apps/{id}/users');
    expect(users[0]).toHaveProperty('hwid'); // the owner sees the field (a reseller without view_hwid does not)
    conforms(Type.Array(LogEntrySchema), (await o.get(`/api/apps/${id}/logs`)).body, 'GET /api/apps/{id}/logs');
    conforms(Type.Array(BanSchema), (await o.get(`/api/apps/${id}/bans`)).body, 'GET /api/apps/{id}/bans');
    const team = (await o.get('/api/team')).body;
    conforms(Type.Array(AccountSchema), team, 'GET /api/team');
    const member = team.find((m: { username: string }) => m.username === 'contract-seller');
    conforms(
      AccountSchema,
      (await o.post(`/api/team/${member.id}/credits`, { amount: 1 })).body,
      'POST /api/team/{id}/credits',
    );
    conforms(
      AccountSchema,
      (await o.patch(`/api/team/${member.id}`, { email: 'seller@example.com' })).body,
      'PATCH /api/team/{id}',
    );
    conforms(AppSchema, (await o.patch(`/apps/${id}`, { heartbeat_interval: 12 })).body, 'PATCH /apps/{id}');
    const gone = (await o.post('/api/team', { username: 'contract-gone', password: 'gone-pass-1' })).body;
    conforms(TeamDeleteSchema, (await o.delete(`/api/team/${gone.id}`)).body, 'DELETE /api/team/{id}');
  });

  it('for Account > Security: second factor, sessions, sign-ins, tokens and the account audit', async () => {
    const o = await new Api(t.base).signIn('owner', 'owner-pass-1');
    const made = (await o.post('/api/tokens', { name: 'contract', scopes: ['apps:read'], app_ids: [f.app.id] })).body;
    conforms(CreatedTokenSchema, made, 'POST /api/tokens');
    await o.get('/api/apps', { token: made.token });
    conforms(Type.Array(ApiTokenSchema), (await o.get('/api/tokens')).body, 'GET /api/tokens');
    conforms(Type.Array(SignInSchema), (await o.get('/api/account/sign-ins')).body, 'GET /api/account/sign-ins');
    conforms(Type.Array(AuditEntrySchema), (await o.get('/api/audit')).body, 'GET /api/audit');
    const setup = (await o.post('/api/auth/2fa/setup')).body;
    conforms(TwoFactorSetupSchema, setup, 'POST /api/auth/2fa/setup');
    const codes = (await o.post('/api/auth/2fa/enable', { code: totp(setup.secret) })).body;
    conforms(RecoveryCodesSchema, codes, 'POST /api/auth/2fa/enable');
    conforms(SecurityStateSchema, (await o.get('/api/account/security')).body, 'GET /api/account/security');
    expect(
      (await o.post('/api/auth/2fa/disable', { password: 'owner-pass-1', code: codes.recovery_codes[0] })).status,
    ).toBe(200);
    f.owner = o; // enabling two-factor signed the fixture's other session out
  });

  it('for a reseller, whose answers leave fields out', async () => {
    const id = f.app.id;
    reseller = await new Api(t.base).signIn('contract-seller', 'seller-pass-1'); // the owner's email change signed it out
    const me = (await reseller.get('/api/auth/me')).body;
    conforms(MeSchema, me, 'GET /api/auth/me (reseller)');
    expect(me.account.credits).toBe(96); // 100, minus one 30-day key at 5, plus the owner's top-up of 1
    const app = (await reseller.get(`/api/apps/${id}`)).body;
    conforms(AppSchema, app, 'GET /api/apps/{id} (reseller)');
    expect(app.api_secret).toBeUndefined();
    conforms(
      CredentialsSchema,
      (await reseller.get(`/api/apps/${id}/credentials`)).body,
      'GET /api/apps/{id}/credentials (reseller)',
    );
    const keys = (await reseller.get(`/api/apps/${id}/licenses`)).body;
    conforms(LicensePageSchema, keys, 'GET /api/apps/{id}/licenses (reseller)');
    expect(keys.items).toHaveLength(1);
    expect(keys.items[0].hwid).toBeUndefined();
    conforms(
      Type.Array(EndUserSchema),
      (await reseller.get(`/api/apps/${id}/users`)).body,
      'GET /api/apps/{id}/users (reseller)',
    );
    const logs = (await reseller.get(`/api/apps/${id}/logs`)).body;
    conforms(Type.Array(LogEntrySchema), logs, 'GET /api/apps/{id}/logs (reseller)');
    conforms(
      Type.Array(BanSchema),
      (await reseller.get(`/api/apps/${id}/bans`)).body,
      'GET /api/apps/{id}/bans (reseller)',
    );
    conforms(StatsSchema, (await reseller.get(`/api/apps/${id}/stats`)).body, 'GET /api/apps/{id}/stats (reseller)');
    conforms(OverviewSchema, (await reseller.get('/api/overview')).body, 'GET /api/overview (reseller)');
  });

  it('for the live WebSocket frames, with the cookie the browser sends', async () => {
    const ws = new WebSocket(`${t.base.replace('http', 'ws')}/api/ws`, {
      headers: { cookie: `kw_session=${f.owner.token}`, origin: t.base },
    });
    const frames: unknown[] = [];
    ws.on('message', (m) => frames.push(JSON.parse(String(m))));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send(JSON.stringify({ type: 'subscribe', app_id: f.app.id }));
    const until = async (n: number) => {
      for (let i = 0; i < 100 && frames.length < n; i++) await new Promise((r) => setTimeout(r, 20));
    };
    await until(1);
    await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 });
    await until(2);
    ws.close();
    expect(frames.map((x) => (x as { type: string }).type)).toEqual(['subscribed', 'event']);
    for (const frame of frames) conforms(LiveFrameSchema, frame, 'a /api/ws frame');
  });

  it('for air-gapped machines: an answered activation request and a seat pool', async () => {
    // f.keys() holds the fixture's first session, which enabling two-factor above signed out.
    const made = await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 30, unit: 'days' });
    const key: string = made.body[0].key;
    const { request } = activationRequest(f.app.id, key, 'contract-airgap-1');
    const answered = await f.owner.post(`/api/apps/${f.app.id}/offline-activations`, { request });
    conforms(OfflineActivationSchema, answered.body, 'POST /api/apps/{id}/offline-activations');
    const row = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(key)}`)).body.items[0];
    const pool = await f.owner.post(`/api/licenses/${row.id}/pools`, {
      seats: 5,
      valid_days: 30,
      relay_id: 'contract',
    });
    conforms(SeatPoolSchema, pool.body, 'POST /api/licenses/{id}/pools');
  });
});
