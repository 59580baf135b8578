// The audit log at volume (docs/protocol.md 15.1): newest first by (time, id), and `before` paging reaches every
// entry exactly once, although thousands share one time and ids disagree with times (an entry queued
// early is written late); filters by text (detail or actor), time range and action.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

async function walk(f: AppFixture, path: string, limit: number): Promise<any[]> {
  const out: any[] = [];
  let before: string | undefined;
  for (let i = 0; i < 10_000; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await f.owner.get(`${path}${sep}limit=${limit}${before ? `&before=${before}` : ''}`);
    expect(r.status).toBe(200);
    out.push(...r.body);
    if (r.body.length < limit) return out;
    before = r.body[r.body.length - 1].id;
  }
  throw new Error('paging did not end');
}

function expectNewestFirst(rows: { time: string; id: string }[]): void {
  for (let i = 1; i < rows.length; i++) {
    const ta = Date.parse(rows[i - 1]!.time);
    const tb = Date.parse(rows[i]!.time);
    const later = ta > tb || (ta === tb && BigInt(rows[i - 1]!.id) > BigInt(rows[i]!.id));
    expect(later, `entry ${i} out of order`).toBe(true);
  }
}

describe('application log at volume', () => {
  it('pages 2,500 entries, 1,500 at one instant and ids against time, each exactly once', async () => {
    const f = await appFixture(t);
    await f.sql('delete from audit_log where app_id = $1', [f.app.id]);
    // Ids rise with g while times fall for g > 1500: the id order is not the time order.
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail)
       select $1, case when g <= 1500 then timestamptz '2026-03-01T12:00:00Z'
                       else timestamptz '2026-03-01T12:00:00Z' - make_interval(secs => g) end,
         'info', case when g % 10 = 0 then 'client.login' else 'client.init' end, 'seeded entry ' || g
       from generate_series(1, 2500) g`,
      [f.app.id],
    );
    const rows = await walk(f, `/api/apps/${f.app.id}/logs`, 173);
    expect(rows).toHaveLength(2500);
    expect(new Set(rows.map((r) => r.id)).size).toBe(2500);
    expectNewestFirst(rows);
    // The last entry inserted is the oldest.
    expect(rows[rows.length - 1].detail).toBe('seeded entry 2500');
    const logins = await walk(f, `/api/apps/${f.app.id}/logs?action=client.login`, 60);
    expect(logins).toHaveLength(250);
    expect(new Set(logins.map((r) => r.id)).size).toBe(250);
  });

  it('filters by text in the detail or the actor, and by an ISO time range', async () => {
    const f = await appFixture(t);
    await f.keys(2, { note: 'x' });
    await f.owner.post(`/api/apps/${f.app.id}/bans`, { type: 'hwid', value: 'needle-hwid' });
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail) values
         ($1, '2025-01-01T10:00:00Z', 'info', 'client.init', 'old 100%_entry'),
         ($1, '2025-01-02T10:00:00Z', 'info', 'client.init', 'middle entry'),
         ($1, '2025-01-03T10:00:00Z', 'info', 'client.init', 'new entry')`,
      [f.app.id],
    );
    const get = async (q: string) => (await f.owner.get(`/api/apps/${f.app.id}/logs?${q}`)).body;
    expect((await get('q=NEEDLE')).map((e: any) => e.action)).toEqual(['blacklist.add']);
    // The actor's username matches too: every dashboard write of the owner.
    const byActor = await get(`q=${encodeURIComponent((await f.owner.get('/api/auth/me')).body.account.username)}`);
    expect(byActor.map((e: any) => e.action).sort()).toEqual(['app.create', 'blacklist.add', 'license.generate']);
    // LIKE's wildcards are taken literally.
    expect((await get('q=100%25_')).map((e: any) => e.detail)).toEqual(['old 100%_entry']);
    expect((await get('q=_')).map((e: any) => e.detail)).toEqual(['old 100%_entry']);
    expect((await get('from=2025-01-02T00:00:00Z&to=2025-01-02T23:59:59Z')).map((e: any) => e.detail)).toEqual([
      'middle entry',
    ]);
    expect((await get('to=2025-01-02')).map((e: any) => e.detail)).toEqual(['old 100%_entry']);
    expect((await get('from=2025-01-02&action=client.init&q=entry')).map((e: any) => e.detail)).toEqual([
      'new entry',
      'middle entry',
    ]);
    const bad = await f.owner.get(`/api/apps/${f.app.id}/logs?from=yesterday`);
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['query', 'from']);
  });
});

describe('account audit at volume', () => {
  it('pages 1,200 account entries at one instant, each exactly once', async () => {
    const f = await appFixture(t);
    const me = (await f.owner.get('/api/auth/me')).body.account;
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail, actor_id, actor_username, actor_role)
       select null, timestamptz '2020-05-05T05:05:05Z', 'info', 'team.paging', 'seeded ' || g, $1, $2, 'owner'
       from generate_series(1, 1200) g`,
      [me.id, me.username],
    );
    const out: any[] = [];
    let before = '';
    for (;;) {
      const r = await f.owner.get(`/api/audit?action=team.paging&limit=97${before}`);
      out.push(...r.body);
      if (r.body.length < 97) break;
      before = `&before=${r.body[r.body.length - 1].id}`;
    }
    expect(out).toHaveLength(1200);
    expect(new Set(out.map((e) => e.id)).size).toBe(1200);
    expectNewestFirst(out);
  });
});
