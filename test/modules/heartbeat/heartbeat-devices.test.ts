// A removed device ends the sessions running on it and no other (docs/protocol.md 12.1, 14.3), against a real
// server: one key (or end user) activated from two HWIDs, heartbeats running over REST and the
// realtime channel; the dashboard's one-device removal of a key and of a user, and the portal's
// one-device reset, kill the removed device's sessions (next beat 403, channel `revoked` with
// `hwid_reset`) while the other device's go on; a reset of every device ends them all. The portal
// reset reaches the vendor's webhook, and a reseller without view_hwid sees it without the HWID.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { Api } from '../../helpers/http.js';
import type { ClientApi } from '../../helpers/client.js';
import { openChannel, type ChannelClient } from '../../helpers/channel-client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { Subscriber } from '../../helpers/live-subscriber.js';
import { pack, unpack } from 'msgpackr';

let t: TestServer;
let receiver: WebhookReceiver<{ path: string; body: { event: string; data: Record<string, unknown> } }>;

beforeAll(async () => {
  receiver = await startWebhookReceiver((d) => ({ path: d.path, body: JSON.parse(d.body) }));
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', ALLOW_PRIVATE_WEBHOOKS: '1' });
}, 120_000);
afterAll(async () => {
  await t.close();
  await receiver.close();
});

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);

/** A client session with a running heartbeat (one accepted beat), over REST or the realtime channel. */
interface Running {
  c: ClientApi;
  ip: string;
  session: string;
  token: string;
  index: number;
  ch?: ChannelClient;
}

async function run(c: ClientApi, ip: string, session: string, channel: boolean): Promise<Running> {
  if (channel) {
    const ch = await openChannel(t.base, session, { ip });
    const start = await ch.call('heartbeat/start', { system_id: SYS });
    expect(start.status).toBe(200);
    const b = await ch.call('heartbeat', { token: start.body.token, system_id: SYS, beat_index: 1, code_hash: HASH });
    expect(b.status).toBe(200);
    return { c, ip, session, token: b.body.new_token, index: 1, ch };
  }
  const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
  expect(start.status).toBe(200);
  const x: Running = { c, ip, session, token: start.body.token, index: 0 };
  expect((await beat(x)).status).toBe(200);
  return x;
}

/** A license-only activation of `key` from `device`, its heartbeat running. */
async function onKey(f: AppFixture, key: string, device: string, channel = false): Promise<Running> {
  const ip = nextIp();
  const c = f.client(ip);
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
  return run(c, ip, session, channel);
}

/** The next REST beat of a session (the token moves on when it is accepted). */
async function beat(x: Running) {
  const r = await x.c.post('/api/client/heartbeat', {
    session: x.session,
    token: x.token,
    system_id: SYS,
    beat_index: ++x.index,
    code_hash: HASH,
  });
  if (r.status === 200) x.token = r.body.new_token;
  return r;
}

/** The session was ended: its next beat is refused. Every worker acts on the live event as it arrives. */
async function killed(x: Running): Promise<void> {
  const end = Date.now() + 3000;
  for (;;) {
    const r = await beat(x);
    if (r.status === 403) {
      expect(r.body).toEqual({ detail: 'rejected' });
      return;
    }
    expect(r.status).toBe(200);
    if (Date.now() > end) throw new Error('the session was not killed');
    await new Promise((res) => setTimeout(res, 25));
  }
}

/** Still running: the next beat is accepted (REST), and a channel got no push (a ping's pong comes next). */
async function alive(x: Running): Promise<void> {
  if (x.ch) {
    const seq = x.ch.send({ type: 'ping' });
    expect(await x.ch.next(() => true)).toMatchObject({ type: 'pong', re: seq });
    const b = await x.ch.call('heartbeat', {
      token: x.token,
      system_id: SYS,
      beat_index: ++x.index,
      code_hash: HASH,
    });
    expect(b.status).toBe(200);
    x.token = b.body.new_token;
    return;
  }
  const r = await beat(x);
  expect([r.status, r.body.success]).toEqual([200, true]);
}

async function revoked(x: Running): Promise<void> {
  expect(await x.ch!.next('revoked')).toMatchObject({ type: 'revoked', reason: 'hwid_reset' });
  expect(await x.ch!.closed).toEqual({ code: 4003, reason: 'hwid_reset' });
}

/** The webhook delivery that matches, or a failure after 5 s (deliveries start right after the answer). */
function delivered(match: (h: { path: string; body: { event: string; data: Record<string, unknown> } }) => boolean) {
  return Promise.race([
    receiver.nextHit(match),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no webhook delivery in 5 s')), 5000)),
  ]);
}

async function licenseId(f: AppFixture, key: string): Promise<string> {
  const items = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(key)}`)).body.items as {
    id: string;
  }[];
  expect(items).toHaveLength(1);
  return items[0]!.id;
}

async function killLines(f: AppFixture): Promise<number> {
  await t.server.services.audit.repository.flush();
  return (await f.owner.get(`/api/apps/${f.app.id}/logs?action=heartbeat.kill`)).body.length as number;
}

describe('a device removed from the dashboard', () => {
  it("of a key: that device's sessions end (REST and channel), the key's other device goes on", async () => {
    const f = await appFixture(t, { max_devices: 3 });
    const [key] = await f.keys(1);
    // Two sessions on the removed device (its HWID given in another case each time), two on the kept one.
    const removedRest = await onKey(f, key!, 'PC-Alpha-0001');
    const removedChannel = await onKey(f, key!, 'pc-alpha-0001', true);
    const keptRest = await onKey(f, key!, 'pc-bravo-0002');
    const keptChannel = await onKey(f, key!, 'PC-BRAVO-0002', true);
    const id = await licenseId(f, key!);
    const pushed = revoked(removedChannel);
    expect((await f.owner.delete(`/api/licenses/${id}/devices/PC-ALPHA-0001`)).status).toBe(200);
    await pushed;
    await killed(removedRest);
    await alive(keptRest);
    await alive(keptChannel);
    expect(await killLines(f)).toBeGreaterThanOrEqual(2);
    // Its client must authenticate again; the kept device's sessions still count as live.
    const again = await removedRest.c.post('/api/client/heartbeat/start', {
      session: removedRest.session,
      system_id: SYS,
    });
    expect(again.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
    const row = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(key!)}`)).body.items[0];
    expect(row.live_sessions).toBe(2);
    expect(row.devices.map((d: { hwid: string }) => d.hwid)).toEqual(['pc-bravo-0002']);
    keptChannel.ch!.close();
  });

  it("of an end user: the sessions logged in from it end, the user's other device goes on", async () => {
    const f = await appFixture(t, { max_devices: 2 });
    const [key] = await f.keys(1);
    const username = `device-user-${Date.now()}`;
    const password = 'user-pass-1';
    const ip1 = nextIp();
    const c1 = f.client(ip1);
    const s1 = await f.session(c1);
    const reg = await c1.post('/api/client/register', {
      session: s1,
      username,
      password,
      license: key,
      hwid: 'Laptop-0001',
    });
    expect(reg.status).toBe(200);
    const onLaptop = await run(c1, ip1, s1, false);
    const ip2 = nextIp();
    const c2 = f.client(ip2);
    const s2 = await f.session(c2);
    expect((await c2.post('/api/client/login', { session: s2, username, password, hwid: 'desktop-0002' })).status).toBe(
      200,
    );
    const onDesktop = await run(c2, ip2, s2, true);
    const users = (await f.owner.get(`/api/apps/${f.app.id}/users`)).body as { id: string; username: string }[];
    const userId = users.find((u) => u.username === username)!.id;

    expect((await f.owner.delete(`/api/users/${userId}/devices/laptop-0001`)).status).toBe(200);
    await killed(onLaptop);
    await alive(onDesktop);
    // The key's one-device removal reaches its user's sessions too.
    const desktopPush = revoked(onDesktop);
    expect((await f.owner.delete(`/api/licenses/${await licenseId(f, key!)}/devices/desktop-0002`)).status).toBe(200);
    await desktopPush;
  });
});

describe('a session activated before the device was recorded', () => {
  it('ends on a removal of any device of its key (it may be on it); sessions of a known other device go on', async () => {
    const f = await appFixture(t, { max_devices: 3 });
    const [key] = await f.keys(1);
    // As an older build stored it: the activated record without `hwid`.
    const ip = nextIp();
    const c = f.client(ip);
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: 'legacy-pc-0001' })).status).toBe(200);
    const coordinator = t.server.services.coordinator;
    const rec = unpack((await coordinator.get(`sess:${session}`))!) as Record<string, unknown>;
    expect(rec.hwid).toBe('legacy-pc-0001');
    delete rec.hwid;
    await coordinator.set(`sess:${session}`, pack(rec), 3_600_000);
    const legacy = await run(c, ip, session, false);
    const other = await onKey(f, key!, 'known-pc-0002');
    const third = await onKey(f, key!, 'known-pc-0003');
    expect((await f.owner.delete(`/api/licenses/${await licenseId(f, key!)}/devices/known-pc-0002`)).status).toBe(200);
    await killed(other);
    await killed(legacy);
    await alive(third);
  });
});

describe('the portal device reset', () => {
  it("of one device ends only its sessions and tells the vendor's webhook; a reset of all ends the rest", async () => {
    const f = await appFixture(t, {
      max_devices: 3,
      portal_enabled: true,
      portal_reset_cooldown_hours: 0,
      webhook: `${receiver.url}/portal-reset`,
    });
    const [key] = await f.keys(1);
    const removed = await onKey(f, key!, 'portal-alpha-0001');
    const removedChannel = await onKey(f, key!, 'portal-alpha-0001', true);
    const kept = await onKey(f, key!, 'portal-bravo-0002');
    const keptChannel = await onKey(f, key!, 'portal-bravo-0002', true);
    const id = await licenseId(f, key!);
    const portal = new Api(t.base);
    const headers = { 'x-forwarded-for': nextIp() };
    const login = await portal.post(
      '/api/portal/login',
      { api_key: f.app.api_key, license: key },
      { token: '', headers },
    );
    const token = login.body.token as string;

    const pushed = revoked(removedChannel);
    const one = await portal.post('/api/portal/reset-hwid', { hwid: 'PORTAL-ALPHA-0001' }, { token, headers });
    expect(one.status).toBe(200);
    await pushed;
    await killed(removed);
    await alive(kept);
    await alive(keptChannel);
    const hit = await delivered((h) => h.path === '/portal-reset' && h.body.event === 'license.reset_hwid');
    expect(hit.body.data).toEqual({
      license_id: id,
      hwid: 'portal-alpha-0001',
      by: 'portal',
      end_sessions: true,
    });

    const keptPushed = revoked(keptChannel);
    expect((await portal.post('/api/portal/reset-hwid', {}, { token, headers })).status).toBe(200);
    await keptPushed;
    await killed(kept);
    const all = await delivered(
      (h) => h.path === '/portal-reset' && h.body.event === 'license.reset_hwid' && !('hwid' in h.body.data),
    );
    expect(all.body.data).toEqual({ license_id: id, by: 'portal', end_sessions: true });
  });
});

describe('what the device removal events show', () => {
  it('the removed HWID only to accounts with view_hwid: a reseller without it sees the event without it', async () => {
    const f = await appFixture(t, { max_devices: 3, portal_enabled: true, portal_reset_cooldown_hours: 0 });
    const username = `device-seller-${Date.now()}`;
    const team = await f.owner.post('/api/team', {
      username,
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { generate_keys: true, view_keys: true },
    });
    expect(team.status).toBe(200);
    const seller = await new Api(t.base).signIn(username, 'seller-pass-1');
    const key = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 3 })).body[0].key as string;
    const removed = await onKey(f, key, 'seller-alpha-0001');
    const kept = await onKey(f, key, 'seller-bravo-0002');
    const ownerStream = await Subscriber.open(t.base, f.owner.token);
    const sellerStream = await Subscriber.open(t.base, seller.token);
    expect(await ownerStream.subscribe(f.app.id)).toMatchObject({ type: 'subscribed' });
    expect(await sellerStream.subscribe(f.app.id)).toMatchObject({ type: 'subscribed' });

    const portal = new Api(t.base);
    const headers = { 'x-forwarded-for': nextIp() };
    const token = (
      await portal.post('/api/portal/login', { api_key: f.app.api_key, license: key }, { token: '', headers })
    ).body.token as string;
    expect(
      (await portal.post('/api/portal/reset-hwid', { hwid: 'seller-alpha-0001' }, { token, headers })).status,
    ).toBe(200);
    const isReset = (m: { event?: { kind: string } }) => m.event?.kind === 'license.reset_hwid';
    expect((await ownerStream.next(isReset)).event.data).toMatchObject({
      hwid: 'seller-alpha-0001',
      end_sessions: true,
    });
    const shown = (await sellerStream.next(isReset)).event.data;
    expect(shown).toMatchObject({ by: 'portal', end_sessions: true });
    expect(shown).not.toHaveProperty('hwid');
    // What the reseller cannot see still ends only the removed device's session.
    await killed(removed);
    await alive(kept);
    ownerStream.close();
    sellerStream.close();
  });
});
