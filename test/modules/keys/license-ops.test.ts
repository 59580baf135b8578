// The conditional writes under license operations, and the one dashboard path that frees a key:
// tests that fail on the exact mutations a mutation run found unguarded (a claim without its status
// condition; a user delete that leaves the key pointing at the deleted user).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { LicenseOpsRepository } from '../../../src/modules/keys/license-ops.repository.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

describe('license claims', () => {
  it('claim moves only a claimable key to pending: never a used, license-only, banned or pending one', async () => {
    const f = await appFixture(t);
    const repo = new LicenseOpsRepository(t.server.services.sql);
    const ids = (await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id])).map(
      (r) => r.id,
    );
    expect(ids).toEqual([]);
    await f.keys(6);
    const keys = await f.sql<{ id: string }>('select id from license_keys where app_id = $1 order by id', [f.app.id]);
    const [unused, used, licenseOnly, banned, pending, reclaimable] = keys.map((k) => k.id);
    const user = (
      await f.sql<{ id: string }>(
        `insert into end_users (id, app_id, username, password_hash, created_at) values (gen_random_uuid(), $1, 'holder', 'x', now()) returning id`,
        [f.app.id],
      )
    )[0]!.id;
    await f.sql(`update license_keys set status = 'used', used_by = 'holder', user_id = $2 where id = $1`, [
      used,
      user,
    ]);
    await f.sql(`update license_keys set status = 'used', used_by = 'license-only' where id = $1`, [licenseOnly]);
    await f.sql(`update license_keys set status = 'banned' where id = $1`, [banned]);
    await f.sql(`update license_keys set status = 'pending', pending_since = now() where id = $1`, [pending]);
    await f.sql(`update license_keys set status = 'used', used_by = 'deleted-user', user_id = null where id = $1`, [
      reclaimable,
    ]);

    const stamp = new Date();
    const claimed: Record<string, boolean> = {};
    for (const [name, id] of Object.entries({ unused, used, licenseOnly, banned, pending, reclaimable }))
      claimed[name] = await repo.claim(id!, stamp);
    expect(claimed).toEqual({
      unused: true,
      used: false,
      licenseOnly: false,
      banned: false,
      pending: false,
      reclaimable: true,
    });
    const statuses = await f.sql<{ id: string; status: string }>(
      'select id, status from license_keys where app_id = $1',
      [f.app.id],
    );
    expect(statuses.find((s) => s.id === used)?.status).toBe('used');
    expect(statuses.find((s) => s.id === banned)?.status).toBe('banned');
  });
});

describe('deleting an end user from the dashboard (docs/protocol.md 11.10)', () => {
  it('leaves its key used with its time, and a later register with the key binds the new user', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { level: 4 });
    const a = f.client();
    const first = await a.post('/api/client/register', {
      session: await f.session(a),
      username: 'first-owner',
      password: 'pw-first-1',
      license: key,
      hwid: hwid(1),
    });
    expect(first.status).toBe(200);
    const [user] = (await f.owner.get(`/api/apps/${f.app.id}/users`)).body;
    expect((await f.owner.delete(`/api/users/${user.id}`)).status).toBe(200);
    const [row] = await f.sql<{ status: string; user_id: string | null }>(
      'select status, user_id from license_keys where app_id = $1',
      [f.app.id],
    );
    expect(row).toEqual({ status: 'used', user_id: null });
    const b = f.client();
    const second = await b.post('/api/client/register', {
      session: await f.session(b),
      username: 'second-owner',
      password: 'pw-second-1',
      license: key,
      hwid: hwid(2),
    });
    expect(second.status).toBe(200);
    expect(second.body.user).toEqual({ username: 'second-owner', level: 4, expires_at: first.body.user.expires_at });
  });
});
