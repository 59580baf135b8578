// A reseller's view of its applications (docs/protocol.md 15.3): the app rows carry counts of its own records
// only, and only with view_stats; and its credit balance reaches its open dashboard as a live event on
// every change (a top-up, a deduction, a spend on generation).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

async function reseller(owner: Api, appId: string, name: string, permissions: Record<string, boolean>) {
  const r = await owner.post('/api/team', {
    username: name,
    password: 'seller-pass-1',
    allowed_apps: [appId],
    key_quota: 100,
    permissions,
  });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  return { id: r.body.id as string, api: await new Api(t.base).signIn(name, 'seller-pass-1') };
}

describe("a reseller's app rows", () => {
  it('count only its own records with view_stats, and carry no counts without it', async () => {
    const f = await appFixture(t);
    await f.keys(5);
    const seeing = await reseller(f.owner, f.app.id, 'countsee', { generate_keys: true, view_stats: true });
    const blind = await reseller(f.owner, f.app.id, 'countblind', { generate_keys: true });
    await seeing.api.post(`/api/apps/${f.app.id}/licenses`, { amount: 2, duration: 1 });
    await blind.api.post(`/api/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 });
    const own = (await seeing.api.get('/api/apps')).body.find((a: any) => a.id === f.app.id);
    expect(own.stats).toEqual({ keys: 2, users: 0 });
    expect((await seeing.api.get(`/api/apps/${f.app.id}`)).body.stats).toEqual({ keys: 2, users: 0 });
    const none = (await blind.api.get('/api/apps')).body.find((a: any) => a.id === f.app.id);
    expect(none).not.toHaveProperty('stats');
    expect((await blind.api.get(`/api/apps/${f.app.id}`)).body).not.toHaveProperty('stats');
    // The owner still sees every record.
    const all = (await f.owner.get('/api/apps')).body.find((a: any) => a.id === f.app.id);
    expect(all.stats).toEqual({ keys: 8, users: 0 });
  });
});

describe("a reseller's credit balance", () => {
  it('is pushed to its open dashboard on a top-up, a deduction and a spend', async () => {
    const f = await appFixture(t);
    const r = await reseller(f.owner, f.app.id, 'balancer', { generate_keys: true });
    const live = await Subscriber.open(t.base, r.api.token);
    const watcher = await Subscriber.open(t.base, f.owner.token);
    try {
      expect((await live.subscribe(f.app.id)).type).toBe('subscribed');
      await watcher.subscribe(f.app.id);
      const credits = (n: number) =>
        live.next((fr) => fr.type === 'event' && fr.event.kind === 'account.credits' && fr.event.data.change === n);
      const topUp = credits(25);
      await f.owner.post(`/api/team/${r.id}/credits`, { amount: 25 });
      expect((await topUp).event.data).toEqual({ account_id: r.id, credits: 125, change: 25 });
      const deduction = credits(-5);
      await f.owner.post(`/api/team/${r.id}/credits`, { amount: -5 });
      expect((await deduction).event.data.credits).toBe(120);
      const spend = credits(-3);
      await r.api.post(`/api/apps/${f.app.id}/licenses`, { amount: 3, duration: 1 });
      expect((await spend).event).toMatchObject({ kind: 'account.credits', app_id: null });
      // Nobody else's stream hears about the reseller's balance.
      await watcher.next((fr) => fr.type === 'event' && fr.event.kind === 'license.generate');
      expect(watcher.frames.some((fr: any) => fr.event?.kind === 'account.credits')).toBe(false);
    } finally {
      live.close();
      watcher.close();
    }
  });
});
