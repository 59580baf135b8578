// Counts over time (charts): activations, logins and new users per hour or UTC day from the audit log
// and the users table, zeros included, scoped like the stats; bad ranges are 422.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { Api } from '../../helpers/http.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

describe('timeseries', () => {
  it('buckets logins, activations and new users per day and hour', async () => {
    const f = await appFixture(t);
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail) values
         ($1, '2026-05-01T01:10:00Z', 'info', 'client.login', ''),
         ($1, '2026-05-01T01:50:00Z', 'info', 'client.login', ''),
         ($1, '2026-05-01T03:00:00Z', 'warning', 'client.login', 'failed'),
         ($1, '2026-05-03T12:00:00Z', 'info', 'client.login', ''),
         ($1, '2026-05-02T12:00:00Z', 'info', 'client.register', ''),
         ($1, '2026-05-02T13:00:00Z', 'info', 'client.license', '')`,
      [f.app.id],
    );
    await f.sql(
      `insert into end_users (id, app_id, username, password_hash, created_at)
       values (gen_random_uuid(), $1, 'ts1', 'x', '2026-05-02T05:00:00Z')`,
      [f.app.id],
    );
    const get = (q: string) => f.owner.get(`/api/apps/${f.app.id}/timeseries?${q}`);
    const days = await get('metric=logins&bucket=day&from=2026-05-01&to=2026-05-03T00:00:00Z');
    expect(days.status).toBe(200);
    expect(days.body.points).toEqual([
      { t: '2026-05-01T00:00:00.000Z', n: 2 },
      { t: '2026-05-02T00:00:00.000Z', n: 0 },
      { t: '2026-05-03T00:00:00.000Z', n: 1 },
    ]);
    const act = await get('metric=activations&from=2026-05-02&to=2026-05-02T23:00:00Z');
    expect(act.body.points).toEqual([{ t: '2026-05-02T00:00:00.000Z', n: 2 }]);
    const hours = await get('metric=logins&bucket=hour&from=2026-05-01T00:00:00Z&to=2026-05-01T02:00:00Z');
    expect(hours.body.points.map((p: any) => p.n)).toEqual([0, 2, 0]);
    const users = await get('metric=new_users&from=2026-05-01&to=2026-05-02');
    expect(users.body.points.map((p: any) => p.n)).toEqual([0, 1]);
    expect((await get('metric=pings')).status).toBe(422);
    expect((await get('metric=logins&from=2020-01-01&to=2026-01-01')).status).toBe(422);
    expect((await get('metric=logins&from=nope')).status).toBe(422);
  });

  it('overview: every metric of the apps the caller sees; a reseller its allowed apps and own numbers', async () => {
    const a = await appFixture(t);
    const b = await appFixture(t);
    const seller = await a.owner.post('/api/team', {
      username: 'overseller',
      password: 'seller-pass-1',
      allowed_apps: [a.app.id],
      permissions: { view_stats: true },
    });
    expect(seller.status).toBe(200);
    await a.sql(
      `insert into audit_log (app_id, at, level, action, detail, reseller_id) values
         ($1, '2026-05-01T01:10:00Z', 'info', 'client.login', '', null),
         ($1, '2026-05-02T01:10:00Z', 'info', 'client.login', '', $3),
         ($2, '2026-05-02T02:00:00Z', 'info', 'client.register', '', null)`,
      [a.app.id, b.app.id, seller.body.id],
    );
    await a.sql(
      `insert into beat_counts (app_id, reseller_id, hour, beats) values
         ($1, '', '2026-05-01T03:00:00Z', 7), ($1, $2, '2026-05-02T04:00:00Z', 5)`,
      [a.app.id, seller.body.id],
    );
    const range = 'from=2026-05-01&to=2026-05-02';
    const all = await a.owner.get(`/api/overview?${range}`);
    expect(all.status).toBe(200);
    expect(all.body.bucket).toBe('day');
    expect(all.body.t).toEqual(['2026-05-01T00:00:00.000Z', '2026-05-02T00:00:00.000Z']);
    const ofA = all.body.apps.find((x: any) => x.id === a.app.id);
    expect(ofA).toEqual({
      id: a.app.id,
      name: a.app.name,
      totals: { activations: 0, logins: 2, beats: 12, new_users: 0 },
      series: { activations: [0, 0], logins: [1, 1], beats: [7, 5], new_users: [0, 0] },
    });
    expect(all.body.apps.find((x: any) => x.id === b.app.id).totals.activations).toBe(1);

    const reseller = await new Api(t.base).signIn('overseller', 'seller-pass-1');
    const mine = await reseller.get(`/api/overview?${range}`);
    expect(mine.status).toBe(200);
    expect(mine.body.apps).toEqual([
      {
        id: a.app.id,
        name: a.app.name,
        totals: { activations: 0, logins: 1, beats: 5, new_users: 0 },
        series: { activations: [0, 0], logins: [0, 1], beats: [0, 5], new_users: [0, 0] },
      },
    ]);
    await a.sql(`update accounts set permissions = permissions || '{"view_stats": false}'::jsonb where id = $1`, [
      seller.body.id,
    ]);
    expect((await reseller.get(`/api/overview?${range}`)).status).toBe(403);
    expect((await a.owner.get('/api/overview?bucket=hour&from=2026-01-01&to=2026-06-01')).status).toBe(422);
    expect((await a.owner.get('/api/overview?metric=logins')).status).toBe(422);
  });
});
