// CSV exports of keys and users (docs/protocol.md 15.5): streamed text/csv with a header row, the listings'
// filters and reseller scoping, and a hidden field's column absent; a slow reader gets every row.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { parseCsv } from '../../helpers/csv.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

async function seedKeys(f: AppFixture, n: number, note = 'seeded'): Promise<void> {
  await f.keys(1, { note: 'template' });
  await f.sql(
    `insert into license_keys (id, app_id, key_hash, key_preview, status, level, duration_value, duration_unit,
       duration_days, created_at, note)
     select gen_random_uuid(), $1, md5('e-a' || g || $3) || md5('e-b' || g || $3), 'EXPO****' || lpad(g::text, 5, '0'),
       'unused', 1, 30, 'days', 30, timestamptz '2026-01-01T00:00:00Z', $3 || ' ' || g
     from generate_series(1, $2::int) g`,
    [f.app.id, n, note],
  );
}

/** A GET read by a client that takes its time: each chunk, then a pause, to the end of the body. */
function slowGet(base: string, path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        res.pause();
        setImmediate(() => res.resume());
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

describe('key export', () => {
  it('streams every key of the listing as CSV, filters included, formulas neutralised', async () => {
    const f = await appFixture(t);
    await seedKeys(f, 2500);
    await f.keys(1, { note: '=HYPERLINK("x")' });
    const r = await f.owner.get(`/api/apps/${f.app.id}/licenses/export.csv`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(r.headers.get('content-disposition')).toContain('attachment');
    const rows = parseCsv(r.raw.toString('utf8'));
    const header = rows[0]!;
    expect(header).toEqual(expect.arrayContaining(['id', 'key_preview', 'hwid', 'ip', 'note', 'created_by']));
    expect(rows).toHaveLength(1 + 2502);
    const ids = rows.slice(1).map((row) => row[header.indexOf('id')]);
    expect(new Set(ids).size).toBe(2502);
    const notes = rows.slice(1).map((row) => row[header.indexOf('note')]);
    expect(notes[0]).toBe(`'=HYPERLINK("x")`);
    const filtered = parseCsv(
      (await f.owner.get(`/api/apps/${f.app.id}/licenses/export.csv?q=template&status=unactivated`)).raw.toString(),
    );
    expect(filtered.slice(1).map((row) => row[header.indexOf('note')])).toEqual(['template']);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses/export.csv?status=nope`)).status).toBe(422);
  });

  it('a slow reader receives the whole export (the server waits for it instead of dropping data)', async () => {
    const f = await appFixture(t);
    await seedKeys(f, 12_000, 'slow reader '.repeat(8));
    const { status, body } = await slowGet(t.base, `/api/apps/${f.app.id}/licenses/export.csv`, f.owner.token!);
    expect(status).toBe(200);
    const rows = parseCsv(body);
    expect(rows).toHaveLength(1 + 12_001);
    expect(new Set(rows.slice(1).map((row) => row[0])).size).toBe(12_001);
  });

  it("a reseller's export holds its own keys only, without the columns it may not see", async () => {
    const f = await appFixture(t);
    await f.keys(3, { note: 'owner key' });
    const made = await f.owner.post('/api/team', {
      username: 'exporter',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { generate_keys: true, view_keys: true },
    });
    expect(made.status).toBe(200);
    const seller = await new Api(t.base).signIn('exporter', 'seller-pass-1');
    await seller.post(`/api/apps/${f.app.id}/licenses`, { amount: 2, duration: 1, note: 'seller key' });
    const rows = parseCsv((await seller.get(`/api/apps/${f.app.id}/licenses/export.csv`)).raw.toString());
    const header = rows[0]!;
    for (const hidden of ['hwid', 'ip', 'known_countries']) expect(header).not.toContain(hidden);
    expect(header).toContain('key_preview');
    expect(rows.slice(1).map((row) => row[header.indexOf('note')])).toEqual(['seller key', 'seller key']);
    // Users: the same rule.
    const users = parseCsv((await seller.get(`/api/apps/${f.app.id}/users/export.csv`)).raw.toString());
    expect(users).toHaveLength(1);
    expect(users[0]).not.toContain('hwid');
    expect(users[0]).toContain('username');
  });
});

describe('user export', () => {
  it('streams every user past 2,000 with its key, and filters by search', async () => {
    const f = await appFixture(t);
    await f.sql(
      `insert into end_users (id, app_id, username, password_hash, created_at, hwid, ip)
       select gen_random_uuid(), $1, 'exp' || lpad(g::text, 5, '0'), 'x', now(), 'hw' || g, '203.0.113.9'
       from generate_series(1, 2300) g`,
      [f.app.id],
    );
    const r = await f.owner.get(`/api/apps/${f.app.id}/users/export.csv`);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = parseCsv(r.raw.toString());
    const header = rows[0]!;
    expect(header).toEqual(expect.arrayContaining(['username', 'key_preview', 'hwid', 'ip']));
    expect(rows).toHaveLength(2301);
    expect(rows[1]![header.indexOf('ip')]).toBe('203.0.113.9');
    const one = parseCsv((await f.owner.get(`/api/apps/${f.app.id}/users/export.csv?q=exp00042`)).raw.toString());
    expect(one.slice(1).map((row) => row[header.indexOf('username')])).toEqual(['exp00042']);
  });
});
