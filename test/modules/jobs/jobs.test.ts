// docs/api.md "Bulk jobs": one server job applies an action to the keys a filter (or a list of ids)
// names, with the single action's rules (a key the single action refuses is skipped with its detail),
// progress live to its creator, cancel after the chunk in flight, visible to its creator and the
// owners above it, and one audit entry for the job besides the per-key ones.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

const finished = () => t.server.app.domain.jobs.drain();

/** `n` keys, activated (a day to run) unless `unused`, lifetime when `lifetime`. */
async function keys(f: AppFixture, n: number, how: { unused?: boolean; lifetime?: boolean } = {}): Promise<string[]> {
  const body = how.lifetime ? { amount: n, unit: 'lifetime' } : { amount: n, duration: 1, unit: 'days' };
  const ids: string[] = [];
  for (let left = n; left > 0; left -= 500) {
    const r = await f.owner.post(`/apps/${f.app.id}/licenses`, { ...body, amount: Math.min(left, 500) });
    if (r.status !== 200) throw new Error(`generation refused: ${JSON.stringify(r.body)}`);
    ids.push(...(r.body as { id: string }[]).map((k) => k.id));
  }
  if (!how.unused)
    await f.sql(
      `update license_keys set status = 'used', used_by = 'license-only', expires_at = now() + interval '1 day'
       where id = any($1::uuid[])`,
      [ids],
    );
  return ids;
}

describe('bulk jobs', () => {
  it("extends the keys a filter names; the single action's refusals are skipped with their detail", async () => {
    const f = await appFixture(t);
    const active = await keys(f, 6);
    const unused = await keys(f, 3, { unused: true });
    const lifetime = await keys(f, 2, { lifetime: true });
    const before = await f.sql<{ id: string; expires_at: Date }>(
      `select id, expires_at from license_keys where id = any($1::uuid[])`,
      [active],
    );
    const r = await f.owner.post(`/api/apps/${f.app.id}/jobs`, {
      action: 'extend',
      filter: {},
      params: { value: 2, unit: 'days' },
    });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ action: 'extend', status: 'running', total: 11, done: 0, succeeded: 0, skipped: 0 });
    await finished();
    const job = (await f.owner.get(`/api/jobs/${r.body.id}`)).body;
    expect(job).toMatchObject({ status: 'done', total: 11, done: 11, succeeded: 6, skipped: 5 });
    const reasons = Object.fromEntries(job.skipped_keys.map((s: { id: string; reason: string }) => [s.id, s.reason]));
    for (const id of unused) expect(reasons[id]).toBe('Key has not been activated yet');
    for (const id of lifetime) expect(reasons[id]).toBe('Lifetime keys cannot be extended');
    expect(job.skipped_keys[0].key_preview).toEqual(expect.any(String));
    const after = await f.sql<{ id: string; expires_at: Date }>(
      `select id, expires_at from license_keys where id = any($1::uuid[])`,
      [active],
    );
    for (const a of after) {
      const b = before.find((x) => x.id === a.id)!;
      expect(new Date(a.expires_at).getTime() - new Date(b.expires_at).getTime()).toBe(2 * 86_400_000);
    }
    await t.server.services.audit.repository.flush();
    const log = (await f.owner.get(`/api/apps/${f.app.id}/logs?limit=100`)).body as {
      action: string;
      detail: string;
    }[];
    expect(log.filter((l) => l.action === 'license.extend')).toHaveLength(6);
    const entry = log.filter((l) => l.action === 'job.extend');
    expect(entry).toHaveLength(1);
    expect(entry[0]!.detail).toContain('6 of 11 keys done, 5 skipped');
  });

  it('takes ids: ban then unban; ids outside the app are skipped as not found', async () => {
    const f = await appFixture(t);
    const other = await appFixture(t);
    const mine = await keys(f, 4);
    const [foreign] = await keys(other, 1);
    const unknown = '00000000-0000-4000-8000-000000000000';
    const ban = await f.owner.post(`/api/apps/${f.app.id}/jobs`, { action: 'ban', ids: [...mine, foreign, unknown] });
    expect(ban.body).toMatchObject({ status: 'running' });
    expect(ban.body.total).toBe(6);
    await finished();
    const banned = (await f.owner.get(`/api/jobs/${ban.body.id}`)).body;
    expect(banned).toMatchObject({ status: 'done', succeeded: 4, skipped: 2 });
    expect(banned.skipped_keys).toEqual(
      expect.arrayContaining([
        { id: foreign, key_preview: null, reason: 'License not found' },
        { id: unknown, key_preview: null, reason: 'License not found' },
      ]),
    );
    const status = async () =>
      (await f.sql<{ status: string }>(`select status from license_keys where id = any($1::uuid[])`, [mine])).map(
        (r) => r.status,
      );
    expect(await status()).toEqual(['banned', 'banned', 'banned', 'banned']);
    expect(
      (await other.sql<{ status: string }>(`select status from license_keys where id = $1`, [foreign]))[0]!.status,
    ).toBe('used');
    await f.owner.post(`/api/apps/${f.app.id}/jobs`, { action: 'unban', ids: mine });
    await finished();
    expect(await status()).toEqual(['used', 'used', 'used', 'used']);
  });

  it('deletes and resets the HWID of filtered keys', async () => {
    const f = await appFixture(t);
    const ids = await keys(f, 3);
    await f.sql(`update license_keys set hwid = 'bulk-hwid-0001' where id = any($1::uuid[])`, [ids]);
    await f.owner.post(`/api/apps/${f.app.id}/jobs`, { action: 'reset_hwid', filter: { status: 'active' } });
    await finished();
    const hwids = await f.sql<{ hwid: string | null }>(`select hwid from license_keys where id = any($1::uuid[])`, [
      ids,
    ]);
    expect(hwids.every((h) => !h.hwid)).toBe(true);
    const del = await f.owner.post(`/api/apps/${f.app.id}/jobs`, { action: 'delete', filter: {} });
    expect(del.body.total).toBe(3);
    await finished();
    expect(await f.sql(`select id from license_keys where app_id = $1`, [f.app.id])).toHaveLength(0);
  });

  it('sends its progress live to its creator and can be cancelled after the chunk in flight', async () => {
    const f = await appFixture(t);
    await keys(f, 1500);
    const live = await Subscriber.open(t.base, f.owner.token);
    try {
      const done = live.next(
        (fr) => fr.type === 'event' && fr.event.kind === 'job.progress' && fr.event.data.status !== 'running',
      );
      const r = await f.owner.post(`/api/apps/${f.app.id}/jobs`, {
        action: 'extend',
        filter: { status: 'active' },
        params: { value: 1, unit: 'hours' },
      });
      const cancel = await f.owner.post(`/api/jobs/${r.body.id}/cancel`, {});
      expect(cancel.status).toBe(200);
      const last = (await done).event;
      expect(last).toMatchObject({ kind: 'job.progress', app_id: null, data: { id: r.body.id, status: 'cancelled' } });
      expect(last.data.done).toBeLessThan(1500);
      expect(last.data.done).toBeGreaterThan(0);
      await finished();
      const job = (await f.owner.get(`/api/jobs/${r.body.id}`)).body;
      expect(job).toMatchObject({ status: 'cancelled', total: 1500, done: last.data.done });
      const extended = await f.sql(
        `select id from license_keys where app_id = $1 and expires_at > now() + interval '1 day'`,
        [f.app.id],
      );
      expect(extended).toHaveLength(job.succeeded);
    } finally {
      live.ws.close();
    }
  });

  it("is seen by its creator and the owner above it; a reseller's refusals are its permissions'", async () => {
    const f = await appFixture(t);
    await keys(f, 2);
    const member = await f.owner.post('/api/team', {
      username: 'jobseller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { view_keys: true, generate_keys: true },
    });
    const seller = await new Api(t.base).signIn('jobseller', 'seller-pass-1');
    const made = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 2, duration: 1 })).body as { id: string }[];
    const own = await seller.post(`/api/apps/${f.app.id}/jobs`, { action: 'ban', filter: {} });
    expect(own.body.total).toBe(2); // only its own keys: the listing's scope
    await finished();
    const seen = (await seller.get(`/api/jobs/${own.body.id}`)).body;
    expect(seen).toMatchObject({ status: 'done', succeeded: 0, skipped: 2 });
    expect(seen.skipped_keys.map((s: { id: string }) => s.id).sort()).toEqual(made.map((k) => k.id).sort());
    expect(seen.skipped_keys[0].reason).toBe('Permission denied');
    expect((await f.owner.get(`/api/jobs/${own.body.id}`)).status).toBe(200);

    const ownerJob = await f.owner.post(`/api/apps/${f.app.id}/jobs`, { action: 'unban', filter: {} });
    await finished();
    const peek = await seller.get(`/api/jobs/${ownerJob.body.id}`);
    expect(peek.status).toBe(404);
    expect(peek.body.detail).toBe('Job not found');
    expect((await seller.post(`/api/jobs/${ownerJob.body.id}/cancel`, {})).status).toBe(404);
    expect(member.status).toBe(200);
  });

  it('refuses a body that names both or neither of ids and filter, or the wrong params', async () => {
    const f = await appFixture(t);
    const [id] = await keys(f, 1);
    const post = (body: unknown) => f.owner.post(`/api/apps/${f.app.id}/jobs`, body);
    const loc = async (body: unknown) => {
      const r = await post(body);
      expect(r.status).toBe(422);
      return r.body.detail[0].loc;
    };
    expect(await loc({ action: 'ban' })).toEqual(['body', 'filter']);
    expect(await loc({ action: 'ban', ids: [id], filter: {} })).toEqual(['body', 'filter']);
    expect(await loc({ action: 'extend', filter: {} })).toEqual(['body', 'params']);
    expect(await loc({ action: 'ban', filter: {}, params: { value: 1, unit: 'days' } })).toEqual(['body', 'params']);
    expect((await loc({ action: 'explode', filter: {} }))[1]).toBe('action');
    expect((await f.owner.get('/api/jobs/00000000-0000-4000-8000-000000000000')).body.detail).toBe('Job not found');
  });
});
