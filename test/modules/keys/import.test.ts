// Importing keys (docs/protocol.md 15.6): list and KeyAuth rows; a key already in the application is skipped
// with its preview and the reason; an invalid row fails the whole import with 422 naming its index;
// imported keys activate like generated ones; limits of 8 MiB and 50,000 keys; a dry run writes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

describe('key import', () => {
  it('imports list rows, skips keys the app has, and the imported keys activate like generated ones', async () => {
    const f = await appFixture(t);
    const [existing] = await f.keys(1);
    const body = {
      format: 'list',
      keys: [
        { key: 'IMPORTED-KEY-0001', duration: 7, unit: 'days', level: 3, note: 'from the spreadsheet' },
        { key: 'IMPORTED-KEY-0002' },
        { key: existing },
        { key: 'IMPORTED-KEY-0001' },
        { key: 'IMPORTED-BANNED-01', status: 'banned' },
      ],
    };
    const dry = await f.owner.post(`/api/apps/${f.app.id}/licenses/import?dry_run=true`, body);
    expect(dry.status).toBe(200);
    expect(dry.body.imported).toBe(3);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items).toHaveLength(1);
    const r = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, body);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      imported: 3,
      skipped: [
        { key_preview: `${existing!.slice(0, 4)}****${existing!.slice(-4)}`, reason: 'already in the application' },
        { key_preview: 'IMPO****0001', reason: 'repeated in the import' },
      ],
    });
    const listed = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=IMPORTED-KEY-0001`)).body.items;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ level: 3, duration_value: 7, duration_unit: 'days', status: 'unused' });
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses?q=IMPORTED-BANNED-01`)).body.items[0].status).toBe(
      'banned',
    );
    // A client registers with an imported key, as with a generated one.
    const c = f.client();
    const session = await f.session(c);
    const reg = await c.post('/api/client/register', {
      session,
      username: 'importer',
      password: 'pw-user-1',
      license: 'IMPORTED-KEY-0001',
      hwid: hwid('importer'),
    });
    expect(reg.status).toBe(200);
    const [redeemed] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=IMPORTED-KEY-0001`)).body.items;
    expect(redeemed).toMatchObject({ status: 'used', used_by: 'importer' });
    expect(Date.parse(redeemed.expires_at) - Date.parse(redeemed.last_login ?? redeemed.created_at)).toBeGreaterThan(
      6 * 86_400_000,
    );
    // Importing again skips everything.
    const again = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, body);
    expect(again.body.imported).toBe(0);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.import`)).body;
    expect(logs).toHaveLength(1);
    expect(logs[0].detail).toBe('3 keys imported (list), 2 skipped');
  });

  it('reads KeyAuth rows: status, seconds of validity, and when a used key was redeemed', async () => {
    const f = await appFixture(t);
    const usedOn = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);
    const r = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, {
      format: 'keyauth',
      keys: [
        { key: 'KA-NOTUSED-1', expires: '2592000', status: 'Not Used', level: '2', note: '' },
        { key: 'KA-USED-0001', expires: 86400, status: 'Used', level: 1, usedby: 'alice', usedon: usedOn },
        { key: 'KA-HOURS-001', expires: 7200, status: 'Banned', level: 1 },
      ],
    });
    expect(r.body).toEqual({ imported: 3, skipped: [] });
    const [notUsed] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=KA-NOTUSED-1`)).body.items;
    expect(notUsed).toMatchObject({ status: 'unused', level: 2, duration_value: 30, duration_unit: 'days' });
    const [used] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=KA-USED-0001`)).body.items;
    expect(used).toMatchObject({ status: 'used', used_by: 'alice', expires_at: '2026-01-02T00:00:00.000Z' });
    const [hours] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=KA-HOURS-001`)).body.items;
    expect(hours).toMatchObject({ status: 'banned', duration_value: 2, duration_unit: 'hours' });
  });

  it('fails the whole import on an invalid row, naming its index; enforces the limits', async () => {
    const f = await appFixture(t);
    const bad = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, {
      format: 'list',
      keys: [{ key: 'GOOD-1' }, { key: 'GOOD-2' }, { key: 'BAD-1', status: 'stolen' }],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['body', 'keys', 2, 'status']);
    expect(bad.body.detail[0].msg).toContain('Row 2');
    const missing = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, { format: 'keyauth', keys: [{}] });
    expect(missing.body.detail[0].loc).toEqual(['body', 'keys', 0, 'key']);
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items).toEqual([]);
    const tooMany = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, {
      format: 'list',
      keys: Array.from({ length: 50_001 }, (_, i) => ({ key: `K${i}` })),
    });
    expect(tooMany.status).toBe(422);
    const tooBig = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, {
      format: 'list',
      keys: [{ key: 'X', note: 'n'.repeat(9 * 1024 * 1024) }],
    });
    expect(tooBig.status).toBe(413);
    // 50,000 keys in one request are accepted.
    const full = await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, {
      format: 'list',
      keys: Array.from({ length: 50_000 }, (_, i) => ({ key: `BULK-${String(i).padStart(6, '0')}` })),
    });
    expect(full.status).toBe(200);
    expect(full.body.imported).toBe(50_000);
  });
});
