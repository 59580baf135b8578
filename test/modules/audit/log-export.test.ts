// The audit log as CSV (docs/protocol.md 15.5): the listing's filters, every entry once past a page, and
// without view_ip no address column and no address inside a detail.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { parseCsv } from '../../helpers/csv.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

describe('log export', () => {
  it('streams the filtered log as CSV, hiding what the reader may not see', async () => {
    const f = await appFixture(t);
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail, ip)
       select $1, timestamptz '2026-04-01T00:00:00Z', 'info', 'client.login', 'login from 198.51.100.' || (g % 200), '198.51.100.7'
       from generate_series(1, 1800) g`,
      [f.app.id],
    );
    const r = await f.owner.get(`/api/apps/${f.app.id}/logs/export.csv?action=client.login`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = parseCsv(r.raw.toString());
    const header = rows[0]!;
    expect(header).toEqual(['id', 'time', 'level', 'action', 'detail', 'actor', 'ip', 'location', 'screen']);
    expect(rows).toHaveLength(1801);
    expect(new Set(rows.slice(1).map((row) => row[0])).size).toBe(1800);
    expect(rows[1]![header.indexOf('ip')]).toBe('198.51.100.7');
    const dated = parseCsv(
      (await f.owner.get(`/api/apps/${f.app.id}/logs/export.csv?from=2026-04-02&action=client.login`)).raw.toString(),
    );
    expect(dated).toHaveLength(1);
    expect((await f.owner.get(`/api/apps/${f.app.id}/logs/export.csv?from=soon`)).status).toBe(422);

    await f.owner.post('/api/team', {
      username: 'logreader',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { view_auth_logs: true, generate_keys: true },
    });
    const seller = await new Api(t.base).signIn('logreader', 'seller-pass-1');
    await seller.post(`/api/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 });
    const mine = parseCsv((await seller.get(`/api/apps/${f.app.id}/logs/export.csv`)).raw.toString());
    expect(mine[0]).toEqual(['id', 'time', 'level', 'action', 'detail', 'actor']);
    expect(mine.slice(1).map((row) => row[3])).toEqual(['license.generate']);
    expect(mine.slice(1)[0]![5]).toBe('logreader');
  });
});
