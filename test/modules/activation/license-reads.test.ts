// What a `license` call reads and writes on the hot path (#26): the key and its device facts in one
// statement shared by the calls of one event-loop turn (each caller gets its own key's answer),
// the key's id remembered by its hash (a key deleted and imported again under a new id is still
// found), and a held device's last-seen written behind the answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { ReadBatcher } from '../../../src/platform/db/read-batcher.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

describe('ReadBatcher', () => {
  it('reads what one turn asked for in one call, in order, and each caller gets its own value', async () => {
    const calls: number[][] = [];
    const b = new ReadBatcher<number, string>(async (keys) => {
      calls.push([...keys]);
      return keys.map((k) => `v${k}`);
    }, 3);
    const first = await Promise.all([1, 2, 3, 4, 5].map((k) => b.load(k)));
    expect(first).toEqual(['v1', 'v2', 'v3', 'v4', 'v5']);
    expect(calls).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    // A later turn is a statement of its own.
    expect(await b.load(6)).toBe('v6');
    expect(calls.at(-1)).toEqual([6]);
  });

  it('fails every read of a batch whose statement failed, and the next batch starts afresh', async () => {
    let fail = true;
    const b = new ReadBatcher<number, number>(async (keys) => {
      if (fail) throw new Error('database gone');
      return keys.map((k) => k * 2);
    });
    const results = await Promise.allSettled([b.load(1), b.load(2)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await Promise.all([b.load(3), b.load(4)])).toEqual([6, 8]);
  });
});

describe('license calls', () => {
  it('many keys activated at once each answer with their own key (one statement per turn)', async () => {
    const f = await appFixture(t, { hwid_lock: true });
    const keys: string[] = [];
    for (let level = 1; level <= 6; level++) keys.push(...(await f.keys(1, { level })));
    const clients = keys.map((_, i) => f.client(`198.51.100.${i + 1}`));
    const sessions = await Promise.all(clients.map((c) => f.session(c)));
    for (const round of [1, 2]) {
      // Round 1 activates (unused -> used), round 2 re-activates (the hot path).
      const answers = await Promise.all(
        keys.map((license, i) =>
          clients[i]!.post('/api/client/license', { session: sessions[i], license, hwid: hwid(i + 1) }),
        ),
      );
      expect(
        answers.map((a) => [a.status, a.body.level]),
        `round ${round}`,
      ).toEqual(keys.map((_, i) => [200, i + 1]));
    }
    // Another device on a key that holds one, under hwid_lock: refused.
    const other = await clients[0]!.post('/api/client/license', {
      session: sessions[0],
      license: keys[0],
      hwid: hwid(99),
    });
    expect(other.status).toBe(403);
  });

  it('a key deleted and imported again answers under its new id; the old id is not used', async () => {
    const f = await appFixture(t);
    const key = 'REIMPORTED-KEY-0001';
    expect(
      (await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, { format: 'list', keys: [{ key, level: 2 }] }))
        .status,
    ).toBe(200);
    const c = f.client();
    const session = await f.session(c);
    const first = await c.post('/api/client/license', { session, license: key, hwid: hwid(1) });
    expect([first.status, first.body.level]).toEqual([200, 2]);
    const [listed] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${key}`)).body.items;
    expect((await f.owner.delete(`/api/licenses/${listed.id}`)).status).toBeLessThan(300);
    // Deleted: the remembered id names no key, and the hash names none either.
    const gone = await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(1) });
    expect([gone.status, gone.body.detail]).toEqual([400, 'Invalid license key']);
    expect(
      (await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, { format: 'list', keys: [{ key, level: 5 }] }))
        .status,
    ).toBe(200);
    const again = await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(1) });
    expect([again.status, again.body.level]).toEqual([200, 5]);
    // Delete it while its id is remembered, import it again, and activate at once: found under the new id.
    const [second] = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${key}`)).body.items;
    await f.owner.delete(`/api/licenses/${second.id}`);
    await f.owner.post(`/api/apps/${f.app.id}/licenses/import`, { format: 'list', keys: [{ key, level: 7 }] });
    const third = await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(1) });
    expect([third.status, third.body.level]).toEqual([200, 7]);
  });

  it("a held device's last-seen is written behind the answer", async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = f.client();
    expect(
      (await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(3) })).status,
    ).toBe(200);
    const [id] = (await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id])).map(
      (r) => r.id,
    );
    const past = new Date('2026-01-01T00:00:00.000Z');
    await f.sql('update key_devices set last_seen = $2 where license_id = $1', [id, past]);
    expect(
      (await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(3) })).status,
    ).toBe(200);
    // The dashboard's listing flushes what is queued behind answers before it reads.
    const [listed] = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items;
    expect(listed.devices).toHaveLength(1);
    expect(Date.parse(listed.devices[0].last_seen)).toBeGreaterThan(past.getTime());
  });
});
