// Hostile input found by review, each case against a real server: requests that froze the server,
// text that became a 500, races that became a 500, replays after a restart, unsigned client 404s.
import { createHash, createHmac } from 'node:crypto';
import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { appFixture, nextIp, type AppFixture } from '../helpers/fixture.js';
import { OWNER, createTestDatabase, startTestServer, type TestServer } from '../helpers/server.js';
import { ClientApi, hwid } from '../helpers/client.js';

let t: TestServer;
let f: AppFixture;
let owner: Api;

beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t);
  owner = f.owner;
});
afterAll(async () => {
  await t?.close();
});

const NUL = 'a\u0000b';

function expectNulRefused(r: { status: number; body: any }, loc: (string | number)[]) {
  expect(r.status, JSON.stringify(r.body)).toBe(422);
  expect(r.body.detail[0]).toMatchObject({ loc, type: 'value_error' });
}

describe('key generation over a small key space (docs/protocol.md 11.19)', () => {
  it('refuses at once, on mask, a mask and alphabet that cannot produce the amount; the server stays responsive', async () => {
    const r = await owner.post(`/apps/${f.app.id}/licenses`, {
      amount: 2,
      duration: 1,
      unit: 'days',
      mask: '********',
      alphabet: '7',
    });
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['body', 'mask']);
    expect((await owner.get('/healthz')).status).toBe(200);
  });

  it('produces exactly the keys left in a small space, then refuses the next one without charging', async () => {
    const app = (await owner.post('/apps', { name: 'tiny space' })).body;
    const first = await owner.post(`/apps/${app.id}/licenses`, {
      amount: 3,
      duration: 1,
      mask: 'K-##',
      alphabet: 'AB',
    });
    expect(first.status).toBe(200);
    const second = await owner.post(`/apps/${app.id}/licenses`, {
      amount: 1,
      duration: 1,
      mask: 'K-##',
      alphabet: 'AB',
    });
    expect(second.status).toBe(200);
    const all = [...first.body, ...second.body].map((k: { key: string }) => k.key).sort();
    expect(all).toEqual(['K-AA', 'K-AB', 'K-BA', 'K-BB']);
    const none = await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1, mask: 'K-##', alphabet: 'AB' });
    expect(none.status).toBe(422);
    expect(none.body.detail[0].loc).toEqual(['body', 'mask']);
    expect((await owner.get(`/api/apps/${app.id}/licenses`)).body.items).toHaveLength(4);
  });
});

describe('U+0000 in text and out-of-range numbers (docs/protocol.md 11.18)', () => {
  it('answers 422 value_error on every dashboard text field, body and query, and stores nothing', async () => {
    expectNulRefused(await owner.post('/apps', { name: NUL }), ['body', 'name']);
    expectNulRefused(await owner.patch(`/apps/${f.app.id}`, { update_message: NUL }), ['body', 'update_message']);
    expectNulRefused(await owner.patch(`/apps/${f.app.id}`, { version: NUL }), ['body', 'version']);
    expectNulRefused(await owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1, note: NUL }), [
      'body',
      'note',
    ]);
    expectNulRefused(
      await owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1, mask: `KW-${NUL}-********` }),
      ['body', 'mask'],
    );
    expectNulRefused(await owner.post(`/apps/${f.app.id}/bans`, { type: 'hwid', value: `hwid-${NUL}-0001` }), [
      'body',
      'value',
    ]);
    expectNulRefused(await owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(NUL)}`), ['query', 'q']);
    expectNulRefused(await owner.get(`/api/apps/${f.app.id}/logs?action=${encodeURIComponent(NUL)}`), [
      'query',
      'action',
    ]);
    const names = (await owner.get('/api/apps')).body.map((a: { name: string }) => a.name);
    expect(names.some((n: string) => n.includes('\u0000'))).toBe(false);
  });

  it('answers 422 for a logs cursor past the bigint range', async () => {
    const r = await owner.get(`/api/apps/${f.app.id}/logs?before=9999999999999999999`);
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['query', 'before']);
  });

  it('answers a signed 422 for U+0000 in client fields, and 404 for an api_key carrying it', async () => {
    const c = f.client();
    const init = await c.post('/api/client/init', { api_key: f.app.api_key, version: `1.0${NUL}` });
    expectNulRefused(init, ['body', 'version']);
    expect((await c.post('/api/client/init', { api_key: `${f.app.api_key}\u0000` })).status).toBe(404);
    const session = await f.session(c);
    const [key] = await f.keys(1);
    const reg = await c.post('/api/client/register', {
      session,
      username: `user${NUL}`,
      password: 'pw-123456',
      license: key,
      hwid: hwid(1),
    });
    expectNulRefused(reg, ['body', 'username']);
  });

  it('accepts free text up to 4,096 characters, including a 4,096-character ban value (docs/protocol.md 11.18)', async () => {
    const long = 'é'.repeat(4096); // 8 KiB of UTF-8: two of them stay under the 16 KiB body limit
    const app = await owner.post('/apps', { name: long, description: 'x'.repeat(4096) });
    expect(app.status).toBe(200);
    expect(app.body.name).toBe(long);
    expect(
      (await owner.patch(`/apps/${app.body.id}`, { update_message: long, disabled_message: 'x'.repeat(4096) })).status,
    ).toBe(200);
    const ban = await owner.post(`/apps/${app.body.id}/bans`, { type: 'hwid', value: long });
    expect(ban.status).toBe(200);
    const again = await owner.post(`/apps/${app.body.id}/bans`, { type: 'hwid', value: long });
    expect(again.body.id).toBe(ban.body.id); // the same entry, found through the value's hash
    expect((await owner.patch(`/apps/${app.body.id}`, { update_message: long + 'x' })).status).toBe(422);
  });
});

describe('the audit log keeps every valid entry of a batch', () => {
  it('stores the valid entries when one entry of the batch is refused by the database', async () => {
    const audit = t.server.services.audit.repository;
    const marker = `batch-${Date.now()}`;
    audit.write({ appId: f.app.id, action: 'test.batch', detail: `${marker} one` });
    audit.write({ appId: f.app.id, action: 'test.batch', detail: `${marker} nul \u0000 inside` });
    // A lone surrogate (JSON.parse lets a client send one) is stored as U+FFFD, not refused.
    audit.write({ appId: f.app.id, action: 'test.batch', detail: `${marker} lone \ud800 \udc00x` });
    // An action cut at 64 characters through a surrogate pair.
    audit.write({ appId: f.app.id, action: `${'a'.repeat(63)}\u{1F600}`, detail: `${marker} cut` });
    audit.write({
      appId: f.app.id,
      action: 'test.batch',
      detail: `${marker} refused`,
      actor: { id: 'not-a-uuid', username: 'nobody', role: 'owner' },
    });
    audit.write({ appId: f.app.id, action: 'test.batch', detail: `${marker} two` });
    await audit.flush();
    const rows = await f.sql<{ detail: string }>('select detail from audit_log where detail like $1 order by id', [
      `${marker}%`,
    ]);
    expect(rows.map((r) => r.detail)).toEqual([
      `${marker} one`,
      `${marker} nul \uFFFD inside`,
      `${marker} lone \uFFFD \uFFFDx`,
      `${marker} cut`,
      `${marker} two`,
    ]);
  });
});

describe('unique-name races (docs/protocol.md 11.22)', () => {
  it('concurrent team creates with one username or one email: one success, the rest 409', async () => {
    const byName = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        owner.post('/api/team', { username: 'race-name', password: 'race-pass-1234', email: `race${i}@example.com` }),
      ),
    );
    expect(byName.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of byName.filter((x) => x.status !== 200))
      expect(r).toMatchObject({ status: 409, body: { detail: 'Username already taken' } });

    const byEmail = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        owner.post('/api/team', { username: `race-mail-${i}`, password: 'race-pass-1234', email: 'same@example.com' }),
      ),
    );
    expect(byEmail.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of byEmail.filter((x) => x.status !== 200))
      expect(r).toMatchObject({ status: 409, body: { detail: 'Email already in use' } });
  });
});

describe('client paths that do not exist (docs/protocol.md 11.20)', () => {
  it('answers signed 404 for an unknown client path and signed 405 with Allow for a wrong method', async () => {
    const c = new ClientApi(t.base);
    const unknown = await c.post('/api/client/nope', {}); // c.post throws unless the response verifies
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ detail: 'Not found' });

    await c.loadKeys();
    const nonce = 'n-wrong-method-0001';
    const res = await fetch(`${t.base}/api/client/init`, { headers: { 'x-nonce': nonce } });
    const raw = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    c.assertSigned('GET', '/api/client/init', res, raw, nonce);
  });
});

describe('dashboard sign-in throttles password spraying', () => {
  it('locks an address after 20 failed sign-ins, whatever the usernames, and not other addresses', async () => {
    const api = new Api(t.base);
    const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
    const ip = nextIp();
    for (let i = 0; i < 20; i++) {
      const r = await api.post('/api/auth/login', { username: `spray-${i}`, password: 'guess-1234' }, from(ip));
      expect(r.status).toBe(401);
    }
    const locked = await api.post('/api/auth/login', { username: OWNER.username, password: OWNER.password }, from(ip));
    expect(locked.status).toBe(429);
    expect(locked.body.detail).toBe('Too many failed attempts, try again later.');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(
      (await api.post('/api/auth/login', { username: OWNER.username, password: OWNER.password }, from(nextIp())))
        .status,
    ).toBe(200);
  });
});

describe('the request-nonce ledger survives a restart (docs/protocol.md 11.21)', () => {
  it('refuses a signed request replayed after the server restarted', async () => {
    const db = await createTestDatabase();
    let first: TestServer | undefined = await startTestServer({}, { databaseUrl: db.url });
    let second: TestServer | undefined;
    try {
      const fx = await appFixture(first, { require_signature: true });
      const body = Buffer.from(JSON.stringify({ api_key: fx.app.api_key }));
      const ts = String(Math.floor(Date.now() / 1000));
      const nonce = 'replay-after-restart-0001';
      const sig = createHmac('sha256', fx.app.api_secret)
        .update(`POST\n/api/client/init\n${ts}\n${nonce}\n${createHash('sha256').update(body).digest('hex')}`)
        .digest('hex');
      const send = (base: string) =>
        fetch(`${base}/api/client/init`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'x-timestamp': ts, 'x-nonce': nonce, 'x-signature': sig },
        });
      expect((await send(first.base)).status).toBe(200);
      expect((await send(first.base)).status).toBe(401);
      const dataDir = first.dataDir;
      await first.server.shutdown('test');
      first = undefined;
      second = await startTestServer({}, { databaseUrl: db.url, dataDir });
      const replay = await send(second.base);
      expect(replay.status).toBe(401);
      expect(await replay.json()).toEqual({ detail: 'Invalid request signature' });
    } finally {
      await first?.server.shutdown('test');
      await second?.server.shutdown('test');
      await db.drop();
      if (second) await fs.rm(second.dataDir, { recursive: true, force: true });
    }
  });
});

describe('hidden fields are absent, and screenshots need view_hwid and view_ip (docs/protocol.md 11.17)', () => {
  it('users and logs show a screenshot path only with both permissions; a hidden ip is absent, not ""', async () => {
    const fx = await appFixture(t);
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    // Each member generates its own key, so the user registered with it (and its log lines) are in its scope.
    const member = async (name: string, permissions: Record<string, boolean>) => {
      const r = await fx.owner.post('/api/team', {
        username: name,
        password: 'seller-pass-1',
        allowed_apps: [fx.app.id],
        permissions: { view_keys: true, view_auth_logs: true, generate_keys: true, ...permissions },
      });
      expect(r.status).toBe(200);
      const api = await new Api(t.base).signIn(name, 'seller-pass-1');
      const [{ key }] = (await api.post(`/apps/${fx.app.id}/licenses`, { amount: 1, duration: 1 })).body;
      const c = fx.client();
      const reg = await c.post('/api/client/register', {
        session: await fx.session(c),
        username: `user-of-${name}`,
        password: 'pw-shot-1',
        license: key,
        hwid: hwid(name),
        screenshot: png.toString('base64'),
      });
      expect(reg.status).toBe(200);
      return api;
    };
    const cases = [
      { api: await member('shots-both', { view_hwid: true, view_ip: true }), ip: true, shots: true },
      { api: await member('shots-hwid', { view_hwid: true }), ip: false, shots: false },
      { api: await member('shots-none', {}), ip: false, shots: false },
    ];
    for (const { api, ip, shots } of cases) {
      const users = (await api.get(`/api/apps/${fx.app.id}/users`)).body as Record<string, unknown>[];
      expect(users).toHaveLength(1);
      for (const field of ['activation_screenshot_path', 'last_screenshot_path', 'screenshot_path'])
        expect(field in users[0]!).toBe(shots);
      expect('ip' in users[0]!).toBe(ip);
      const logs = ((await api.get(`/api/apps/${fx.app.id}/logs`)).body as Record<string, unknown>[]).filter(
        (l) => l.action === 'client.register',
      );
      expect(logs).toHaveLength(1);
      expect('ip' in logs[0]!).toBe(ip); // absent, never ""
      expect('screen' in logs[0]!).toBe(shots);
      if (shots) expect(logs[0]!.screen).toMatch(/^screenshots\//); // the log's Screen column points at the activation's
    }
  });
});
