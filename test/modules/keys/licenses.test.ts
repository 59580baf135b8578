import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;
let appId: string;

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appId = (await owner.post('/apps', { name: 'Keys' })).body.id;
});
afterAll(() => t.close());

describe('key generation', () => {
  it('rule 1: fills the mask from the alphabet and copies every other character', async () => {
    const r = await owner.post(`/apps/${appId}/licenses`, {
      amount: 20,
      duration: 30,
      unit: 'days',
      mask: 'KW-****-####-XXXX',
      alphabet: 'AB12',
    });
    expect(r.status).toBe(200);
    expect(r.body).toHaveLength(20);
    for (const k of r.body) {
      expect(k.key).toMatch(/^KW-[AB12]{4}-[AB12]{4}-[AB12]{4}$/);
      expect(k).toMatchObject({
        status: 'unused',
        computed_status: 'unactivated',
        level: 1,
        duration_value: 30,
        duration_unit: 'days',
        duration_days: 30,
        expires_at: null,
        used_by: '',
      });
      expect(k.key_preview).toBe(`${k.key.slice(0, 4)}****${k.key.slice(-4)}`);
    }
    expect(new Set(r.body.map((k: { key: string }) => k.key)).size).toBe(20);
  });

  it('rule 2: the alphabet is a non-empty union of Uppercase, Lowercase and Numbers', async () => {
    const lower = await owner.post(`/apps/${appId}/licenses`, { amount: 3, duration: 1, alphabet: 'abc' });
    for (const k of lower.body) expect(k.key).toMatch(/^[abc]{5}(-[abc]{5}){4}$/);
    for (const alphabet of ['', 'AB-', 'äöü']) {
      const r = await owner.post(`/apps/${appId}/licenses`, { amount: 1, duration: 1, alphabet });
      expect(r.status, alphabet).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['body', 'alphabet']);
    }
    // docs/protocol.md 11.19: a mask with fewer than 8 placeholders is weak but valid; one without any is refused.
    const weakMask = await owner.post(`/apps/${appId}/licenses`, { amount: 1, duration: 1, mask: 'KEY-***' });
    expect(weakMask.status).toBe(200);
    expect(weakMask.body[0].key).toMatch(/^KEY-[A-Z0-9]{3}$/);
    const noPlaceholder = await owner.post(`/apps/${appId}/licenses`, { amount: 1, duration: 1, mask: 'KEY-ABC' });
    expect(noPlaceholder.status).toBe(422);
    expect(noPlaceholder.body.detail[0].loc).toEqual(['body', 'mask']);
  });

  it('rule 6: plaintext is returned only at generation; storage keeps a keyed hash and a preview', async () => {
    const r = await owner.post(`/apps/${appId}/licenses`, { amount: 2, duration: 7, note: 'batch-42' });
    const keys: string[] = r.body.map((k: { key: string }) => k.key);
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      const rows = await client.query('select * from license_keys where note = $1', ['batch-42']);
      expect(rows.rowCount).toBe(2);
      const dump = JSON.stringify(rows.rows);
      for (const key of keys) expect(dump).not.toContain(key);
      for (const row of rows.rows) expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    } finally {
      await client.end();
    }
    const logs = await owner.get(`/api/apps/${appId}/logs?action=license.generate`);
    for (const key of keys) expect(JSON.stringify(logs.body)).not.toContain(key);
  });

  it('stores level, note, lifetime and hour durations', async () => {
    const life = await owner.post(`/apps/${appId}/licenses`, { amount: 1, unit: 'lifetime', level: 3, note: 'vip' });
    expect(life.body[0]).toMatchObject({ duration_unit: 'lifetime', duration_days: 0, level: 3, note: 'vip' });
    const hours = await owner.post(`/apps/${appId}/licenses`, { amount: 1, duration: 25, unit: 'hours' });
    expect(hours.body[0]).toMatchObject({ duration_value: 25, duration_unit: 'hours', duration_days: 2 });
  });

  it('enforces the limits: amount 1-500, duration 1-3650 days, level >= 1', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ amount: 0, duration: 1 }, 'amount'],
      [{ amount: 501, duration: 1 }, 'amount'],
      [{ amount: 1.5, duration: 1 }, 'amount'],
      [{ amount: 1, duration: 0 }, 'duration'],
      [{ amount: 1, duration: 3651 }, 'duration'],
      [{ amount: 1, duration: 122, unit: 'months' }, 'duration'],
      [{ amount: 1 }, 'duration'],
      [{ amount: 1, duration: 1, level: 0 }, 'level'],
      [{ amount: 1, duration: 1, unit: 'years' }, 'unit'],
    ];
    for (const [body, field] of bad) {
      const r = await owner.post(`/apps/${appId}/licenses`, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(
        r.body.detail.map((d: { loc: string[] }) => d.loc[1]),
        JSON.stringify(body),
      ).toContain(field);
    }
    const max = await owner.post(`/apps/${appId}/licenses`, { amount: 500, duration: 3650 });
    expect(max.status).toBe(200);
    expect(max.body).toHaveLength(500);
  });

  it('charges a reseller per docs/spec.md pricing in the same transaction and refuses a short balance', async () => {
    const ownerId = (await owner.get('/api/auth/me')).body.account.id;
    await owner.patch(`/apps/${appId}`, { key_costs: { 'days:30': 10 } });
    const seller = await createAccount(t, {
      username: 'credit-seller',
      password: 'seller-pass-1',
      role: 'reseller',
      parentId: ownerId,
      ownerId,
    });
    await t.server.services.sql.run(
      `update accounts set key_quota = 25, allowed_apps = ?::jsonb, permissions = jsonb_set(permissions, '{generate_keys}', 'true') where id = ?`,
      [JSON.stringify([appId]), seller.id],
    );
    const r = await new Api(t.base).signIn('credit-seller', 'seller-pass-1');
    const ok = await r.post(`/apps/${appId}/licenses`, { amount: 2, duration: 30 }); // 2 x 10
    expect(ok.status).toBe(200);
    expect(ok.body[0].reseller_id).toBe(seller.id);
    expect((await r.get('/api/auth/me')).body.account.credits).toBe(5);
    const short = await r.post(`/apps/${appId}/licenses`, { amount: 1, duration: 30 });
    expect(short.status).toBe(403);
    expect(short.body).toEqual({ detail: 'Insufficient credits' });
    expect((await r.get('/api/auth/me')).body.account.credits).toBe(5);
    const exact = await r.post(`/apps/${appId}/licenses`, { amount: 5, duration: 1 }); // ceil(1/30*10) = 1 each
    expect(exact.status).toBe(200);
    expect((await r.get('/api/auth/me')).body.account.credits).toBe(0);
  });

  it('concurrent generations against one balance never overdraw it', async () => {
    const ownerId = (await owner.get('/api/auth/me')).body.account.id;
    const app2 = (await owner.post('/apps', { name: 'Race' })).body.id;
    const seller = await createAccount(t, {
      username: 'race-seller',
      password: 'seller-pass-1',
      role: 'reseller',
      parentId: ownerId,
      ownerId,
    });
    await t.server.services.sql.run(
      `update accounts set key_quota = 10, allowed_apps = ?::jsonb, permissions = jsonb_set(permissions, '{generate_keys}', 'true') where id = ?`,
      [JSON.stringify([app2]), seller.id],
    );
    const r = await new Api(t.base).signIn('race-seller', 'seller-pass-1');
    const results = await Promise.all(
      Array.from({ length: 25 }, () => r.post(`/apps/${app2}/licenses`, { amount: 1, duration: 1 })),
    );
    expect(results.filter((x) => x.status === 200)).toHaveLength(10);
    for (const x of results.filter((y) => y.status !== 200)) expect(x.body).toEqual({ detail: 'Insufficient credits' });
    expect((await r.get('/api/auth/me')).body.account.credits).toBe(0);
    expect((await owner.get(`/api/apps/${app2}`)).body.stats.keys).toBe(10);
  });
});
