// Listings at volume (docs/protocol.md 15.1): keys and users newest first by (time, id), with cursors that reach
// every record exactly once although thousands share one timestamp; a pasted full key is found through
// its keyed hash; users beyond docs/spec.md's 2,000 through server search and cursor pages.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

/** Every page of `path` (a listing returning {items, next_cursor}), in order. */
async function walk(f: AppFixture, path: string, limit: number): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 10_000; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const r: { status: number; body: any } = await f.owner.get(
      `${path}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`,
    );
    expect(r.status).toBe(200);
    out.push(...r.body.items);
    cursor = r.body.next_cursor;
    if (!cursor) return out;
  }
  throw new Error('paging did not end');
}

/** Newest first by (time, id): each row is after the next one in that order. */
function expectNewestFirst(rows: { created_at: string; id: string }[]): void {
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1]!;
    const b = rows[i]!;
    const ta = Date.parse(a.created_at);
    const tb = Date.parse(b.created_at);
    expect(ta > tb || (ta === tb && a.id > b.id), `row ${i} out of order`).toBe(true);
  }
}

describe('key and user listings at volume', () => {
  it('pages 3,000 keys, 2,000 of them at one instant, each exactly once and newest first', async () => {
    const f = await appFixture(t);
    await f.keys(1, { note: 'template' });
    const [template] = await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id]);
    // 2,000 keys at one timestamp and 999 more spread over the seconds before it.
    await f.sql(
      `insert into license_keys
       select (jsonb_populate_record(null::license_keys, to_jsonb(k) || jsonb_build_object(
         'id', gen_random_uuid(), 'key_hash', md5('p-a' || g) || md5('p-b' || g),
         'key_preview', 'PAGE****' || lpad(g::text, 4, '0'), 'note', 'seeded ' || g,
         'created_at', case when g <= 2000 then timestamptz '2026-01-01T00:00:00Z'
                            else timestamptz '2026-01-01T00:00:00Z' - make_interval(secs => g) end))).*
       from license_keys k, generate_series(1, 2999) g where k.id = $1`,
      [template!.id],
    );
    const rows = await walk(f, `/api/apps/${f.app.id}/licenses`, 137);
    expect(rows).toHaveLength(3000);
    expect(new Set(rows.map((r) => r.id)).size).toBe(3000);
    expect(rows[0].note).toBe('template');
    expectNewestFirst(rows);
    // The same through a filter: the cursor holds under `q` too.
    const seeded = await walk(f, `/api/apps/${f.app.id}/licenses?q=seeded`, 250);
    expect(seeded).toHaveLength(2999);
    expect(new Set(seeded.map((r) => r.id)).size).toBe(2999);
  });

  it('finds a key by its full plaintext through the keyed hash, and only that key', async () => {
    const f = await appFixture(t);
    const keys = await f.keys(5, { mask: 'SAME-XXXXXXXX-XXXX' });
    const target = keys[3]!;
    const listed = await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(target)}`);
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    const [row] = await f.sql<{ id: string }>(`select id from license_keys where app_id = $1 and key_preview = $2`, [
      f.app.id,
      `${target.slice(0, 4)}****${target.slice(-4)}`,
    ]);
    expect(listed.body.items[0].id).toBe(row!.id);
    // The preview prefix alone matches every key of the mask; a wrong full key matches none.
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=SAME`)).body.items).toHaveLength(5);
    const wrong = `${target.slice(0, -1)}${target.endsWith('A') ? 'B' : 'A'}`;
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(wrong)}`)).body.items).toEqual([]);
  });

  it('pages 2,600 users past the 2,000 cap, searches them on the server and shows each key', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const [lic] = await f.sql<{ id: string; key_preview: string }>(
      'select id, key_preview from license_keys where app_id = $1',
      [f.app.id],
    );
    await f.sql(
      `insert into end_users (id, app_id, username, password_hash, created_at, license_id)
       select gen_random_uuid(), $1, 'user' || lpad(g::text, 5, '0'), 'x',
         case when g <= 1500 then timestamptz '2026-02-01T00:00:00Z'
              else timestamptz '2026-02-01T00:00:00Z' - make_interval(secs => g) end,
         case when g = 2500 then $2::uuid else null end
       from generate_series(1, 2600) g`,
      [f.app.id, lic!.id],
    );
    const plain = await f.owner.get(`/api/apps/${f.app.id}/users`);
    expect(Array.isArray(plain.body)).toBe(true);
    expect(plain.body).toHaveLength(2000);
    const rows = await walk(f, `/api/apps/${f.app.id}/users`, 300);
    expect(rows).toHaveLength(2600);
    expect(new Set(rows.map((r) => r.id)).size).toBe(2600);
    expectNewestFirst(rows);
    // user02500 is among the oldest 600, beyond the plain listing's 2,000.
    expect(plain.body.some((u: any) => u.username === 'user02500')).toBe(false);
    const found = await f.owner.get(`/api/apps/${f.app.id}/users?q=user02500`);
    expect(found.body.items.map((u: any) => u.username)).toEqual(['user02500']);
    expect(found.body.items[0].key_preview).toBe(lic!.key_preview);
    // By the full key the user is bound to, and by part of a name.
    const byKey = await f.owner.get(`/api/apps/${f.app.id}/users?q=${encodeURIComponent(key!)}`);
    expect(byKey.body.items.map((u: any) => u.username)).toEqual(['user02500']);
    expect((await walk(f, `/api/apps/${f.app.id}/users?q=user025`, 40)).length).toBe(100);
    expect((await f.owner.get(`/api/apps/${f.app.id}/users?cursor=nonsense`)).status).toBe(422);
  });
});
