// Last login and IP of an already-activated key are written behind the answer: the
// touch is coalesced per key, written by the next turn, kept (never dropped) while the database
// refuses it, and written at shutdown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { KeyTouchesRepository } from '../../../src/modules/keys/key-touches.repository.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

type Row = { id: string; ip: string; last_login: Date | null };

describe('license calls on an activated key', () => {
  it('record the latest IP and login, visible in the dashboard listing', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const first = f.client('198.51.100.7');
    expect(
      (await first.post('/api/client/license', { session: await f.session(first), license: key, hwid: hwid(1) }))
        .status,
    ).toBe(200);
    const before = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items[0];
    expect(before.ip).toBe('198.51.100.7');
    // Same device (its HWID is bound already) from another address: the write goes behind the answer.
    const second = f.client('198.51.100.8');
    expect(
      (await second.post('/api/client/license', { session: await f.session(second), license: key, hwid: hwid(1) }))
        .status,
    ).toBe(200);
    const after = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items[0];
    expect(after.ip).toBe('198.51.100.8');
    expect(Date.parse(after.last_login)).toBeGreaterThanOrEqual(Date.parse(before.last_login));
  });
});

describe('KeyTouchesRepository', () => {
  it('coalesces per key, keeps touches while the database refuses them, and writes them once it accepts', async () => {
    const f = await appFixture(t);
    await f.keys(2);
    const ids = (
      await f.sql<{ id: string }>('select id from license_keys where app_id = $1 order by id', [f.app.id])
    ).map((r) => r.id);
    await f.sql(`update license_keys set status = 'used', used_by = 'license-only', hwid = 'h' where app_id = $1`, [
      f.app.id,
    ]);
    const repo = new KeyTouchesRepository(t.server.services.sql, t.server.services.log);
    const at = new Date('2026-11-24T10:00:00.000Z');

    // The database refuses the UPDATE (its column is missing): nothing is lost.
    await f.sql('alter table license_keys rename column ip to ip_gone');
    try {
      await repo.touch(ids[0]!, { ip: '203.0.113.1', at });
      await repo.touch(ids[0]!, { ip: '203.0.113.2', at }); // the latest touch of a key wins
      await repo.touch(ids[1]!, { ip: '203.0.113.3', at });
      await expect(repo.flush()).rejects.toThrow();
      expect(repo.size).toBe(2);
    } finally {
      await f.sql('alter table license_keys rename column ip_gone to ip');
    }
    await repo.close();
    expect(repo.size).toBe(0);
    const rows = await f.sql<Row>('select id, ip, last_login from license_keys where app_id = $1 order by id', [
      f.app.id,
    ]);
    expect(rows.map((r) => [r.ip, r.last_login?.toISOString()])).toEqual([
      ['203.0.113.2', at.toISOString()],
      ['203.0.113.3', at.toISOString()],
    ]);
  });

  it('never touches a key that was banned before the write', async () => {
    const f = await appFixture(t);
    await f.keys(1);
    const [{ id }] = (await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id])) as [
      { id: string },
    ];
    await f.sql(`update license_keys set status = 'banned', ip = 'old' where id = $1`, [id]);
    const repo = new KeyTouchesRepository(t.server.services.sql, t.server.services.log);
    await repo.touch(id, { ip: '203.0.113.9', at: new Date() });
    await repo.flush();
    const [row] = await f.sql<Row>('select id, ip, last_login from license_keys where id = $1', [id]);
    expect(row).toMatchObject({ ip: 'old', last_login: null });
  });
});
