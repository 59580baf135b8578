// Accepted heartbeats as a chart: real beats through a real server, counted in memory per application
// and hour, added to beat_counts by a flush (twice into one hour adds up), served by the timeseries
// route per hour and per UTC day, scoped to a reseller's own keys, and gone with their application.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';

const HOUR = 3_600_000;
const SYS = 'system-beats-01';
const HASH = 'beef'.repeat(8);

let t: TestServer;
const clock = new TestClock();
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' }, { clock });
});
afterAll(() => t.close());

/** A license session with a started heartbeat; `beat()` sends the next valid beat and expects 200. */
async function live(f: AppFixture, key: string) {
  const c = f.client();
  c.now = () => clock.now();
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
  const r = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
  expect(r.status).toBe(200);
  let token = r.body.token as string;
  let index = 0;
  return {
    async beat() {
      const res = await c.post('/api/client/heartbeat', {
        session,
        token,
        system_id: SYS,
        beat_index: ++index,
        code_hash: HASH,
      });
      expect(res.status).toBe(200);
      token = res.body.new_token;
    },
  };
}

const flush = () => t.server.app.domain.heartbeat.beatCounts.flush();

describe('beats per application', () => {
  it('are counted per hour and day, add up across flushes, and are scoped to a reseller', async () => {
    const f = await appFixture(t, { heartbeat_interval: 300 });
    // Place the clock 5 minutes before the top of an hour, so the beats fall into two hours.
    const now = clock.now();
    clock.advance((((55 * 60_000 - (now % HOUR)) % HOUR) + HOUR) % HOUR);
    const first = Math.floor(clock.now() / HOUR) * HOUR;

    const seller = await f.owner.post('/api/team', {
      username: 'beatseller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      key_quota: 10,
      permissions: { generate_keys: true, view_stats: true },
    });
    expect(seller.status).toBe(200);
    const reseller = await new Api(t.base).signIn('beatseller', 'seller-pass-1');
    const sellerKey = (await reseller.post(`/api/apps/${f.app.id}/licenses`, { amount: 1, duration: 30, unit: 'days' }))
      .body[0].key as string;
    const [ownerKey] = await f.keys(1);

    const mine = await live(f, ownerKey!);
    const theirs = await live(f, sellerKey);
    await mine.beat();
    await mine.beat();
    await theirs.beat();
    await flush();
    await mine.beat(); // the same hour again: added to the row the first flush wrote
    await flush();
    clock.advance(10 * 60_000); // the next hour, well inside the beat interval
    await mine.beat();
    await mine.beat();
    await theirs.beat();
    await flush();

    const iso = (ms: number) => new Date(ms).toISOString();
    const range = `from=${iso(first - HOUR)}&to=${iso(first + HOUR)}`;
    const hours = await f.owner.get(`/api/apps/${f.app.id}/timeseries?metric=beats&bucket=hour&${range}`);
    expect(hours.status).toBe(200);
    expect(hours.body).toEqual({
      metric: 'beats',
      bucket: 'hour',
      points: [
        { t: iso(first - HOUR), n: 0 },
        { t: iso(first), n: 4 },
        { t: iso(first + HOUR), n: 3 },
      ],
    });

    // Days sum their hours (the two hours may sit on either side of midnight UTC).
    const days = await f.owner.get(`/api/apps/${f.app.id}/timeseries?metric=beats&bucket=day&${range}`);
    expect(days.status).toBe(200);
    const day = (ms: number) => Math.floor(ms / 86_400_000) * 86_400_000;
    const expected = new Map<number, number>();
    expected.set(day(first - HOUR), 0);
    for (const [at, n] of [
      [first, 4],
      [first + HOUR, 3],
    ] as const)
      expected.set(day(at), (expected.get(day(at)) ?? 0) + n);
    expect(days.body.points).toEqual([...expected].map(([at, n]) => ({ t: iso(at), n })));

    // The reseller sees the beats of its own key only.
    const scoped = await reseller.get(`/api/apps/${f.app.id}/timeseries?metric=beats&bucket=hour&${range}`);
    expect(scoped.status).toBe(200);
    expect(scoped.body.points.map((p: { n: number }) => p.n)).toEqual([0, 1, 1]);
    const rows = await f.sql(`select reseller_id, sum(beats)::int as n from beat_counts where app_id = $1 group by 1`, [
      f.app.id,
    ]);
    expect(Object.fromEntries(rows.map((r) => [r.reseller_id, r.n]))).toEqual({ '': 5, [seller.body.id]: 2 });
  });

  it('go with their application, and counts of an application deleted before the flush are dropped', async () => {
    const f = await appFixture(t, { heartbeat_interval: 300 });
    const [key] = await f.keys(1);
    const s = await live(f, key!);
    await s.beat();
    await flush();
    expect((await f.sql(`select 1 from beat_counts where app_id = $1`, [f.app.id])).length).toBe(1);
    await s.beat(); // counted, not yet written
    expect(t.server.app.domain.heartbeat.beatCounts.size).toBe(1);
    expect((await f.owner.delete(`/api/apps/${f.app.id}`)).status).toBe(200);
    expect((await f.sql(`select 1 from beat_counts where app_id = $1`, [f.app.id])).length).toBe(0);
    await flush(); // the app is gone: its pending count is dropped, the flush does not fail
    expect(t.server.app.domain.heartbeat.beatCounts.size).toBe(0);
    expect((await f.sql(`select 1 from beat_counts where app_id = $1`, [f.app.id])).length).toBe(0);
  });

  it('refuse a range longer than 2,000 buckets and an unknown metric', async () => {
    const f = await appFixture(t);
    const get = (q: string) => f.owner.get(`/api/apps/${f.app.id}/timeseries?${q}`);
    expect((await get('metric=beats&bucket=hour&from=2026-01-01&to=2026-06-01')).status).toBe(422);
    expect((await get('metric=pings')).status).toBe(422);
  });
});
