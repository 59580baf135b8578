// Activation geo, known_countries, the Logs Location column and the "new device or new location"
// alert (docs/spec.md "End user", "Log entry", "Alert webhook"), against the packaged DB-IP Lite
// city database. The addresses are real public ones whose place that pinned database states:
// 81.2.69.142 London GB, 8.8.8.8 Mountain View US, 193.0.6.139 Amsterdam NL, 194.150.168.168 Berlin DE.
// They only travel in X-Forwarded-For (the server trusts 127.0.0.1 as its proxy); nothing connects to them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';

const LONDON = '81.2.69.142';
const MOUNTAIN_VIEW = '8.8.8.8';
const AMSTERDAM = '193.0.6.139';
const BERLIN = '194.150.168.168';

interface Hit {
  path: string;
  body: any;
}

let t: TestServer;
let receiver: WebhookReceiver<Hit>;
let hookBase: string;
const nextHit = (match: (h: Hit) => boolean) => receiver.nextHit(match);

beforeAll(async () => {
  receiver = await startWebhookReceiver((d) => ({ path: d.path, body: JSON.parse(d.body) }));
  hookBase = receiver.url;
  t = await startTestServer({
    TRUSTED_PROXIES: '127.0.0.1',
    ALLOW_PRIVATE_WEBHOOKS: '1',
    WEBHOOK_RETRY_MS: '10,10,10',
  });
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

async function register(f: AppFixture, ip: string, username: string, device = hwid(username)) {
  const [key] = await f.keys(1);
  const c = f.client(ip);
  const r = await c.post('/api/client/register', {
    session: await f.session(c),
    username,
    password: 'pw-geo-123',
    license: key,
    hwid: device,
  });
  expect(r.status).toBe(200);
  return key!;
}

async function login(f: AppFixture, ip: string, username: string, device = hwid(username)) {
  const c = f.client(ip);
  const r = await c.post('/api/client/login', {
    session: await f.session(c),
    username,
    password: 'pw-geo-123',
    hwid: device,
  });
  expect(r.status).toBe(200);
}

async function userRow(api: Api, f: AppFixture, username: string) {
  const r = await api.get(`/api/apps/${f.app.id}/users`);
  expect(r.status).toBe(200);
  return r.body.find((u: { username: string }) => u.username === username);
}

describe('activation geo', () => {
  it('stores where a user registered and logged in, grows known_countries and shows them to the owner', async () => {
    const f = await appFixture(t);
    await register(f, LONDON, 'geo-ann');
    const london = { ip: LONDON, city: 'London', region: 'England', country: 'GB', lat: 51.5143, lon: -0.0912 };
    let u = await userRow(f.owner, f, 'geo-ann');
    expect(u).toMatchObject({
      ip: LONDON,
      known_countries: ['GB'],
      activation_geo: london,
      geo: london,
      last_geo: london,
    });

    await login(f, MOUNTAIN_VIEW, 'geo-ann');
    u = await userRow(f.owner, f, 'geo-ann');
    expect(u.known_countries).toEqual(['GB', 'US']);
    expect(u.activation_geo).toEqual(london);
    expect(u.last_geo).toEqual({
      ip: MOUNTAIN_VIEW,
      city: 'Mountain View',
      region: 'California',
      country: 'US',
      lat: 37.422,
      lon: -122.085,
    });
    expect(u.geo).toEqual(u.last_geo);

    // A country seen before is not added twice.
    await login(f, LONDON, 'geo-ann');
    expect((await userRow(f.owner, f, 'geo-ann')).known_countries).toEqual(['GB', 'US']);
  });

  it('gives log entries a Location; private addresses resolve to nothing', async () => {
    const f = await appFixture(t);
    await register(f, AMSTERDAM, 'geo-loc');
    await register(f, '198.18.200.1', 'geo-private');
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=client.register`)).body as {
      ip: string;
      location: string;
    }[];
    expect(logs.find((l) => l.ip === AMSTERDAM)?.location).toBe('Amsterdam (Amsterdam-Centrum), North Holland, NL');
    expect(logs.find((l) => l.ip === '198.18.200.1')?.location).toBe('');
    const u = await userRow(f.owner, f, 'geo-private');
    expect(u).toMatchObject({ known_countries: [], geo: null, last_geo: null, activation_geo: null });
  });

  it('records a license-only key’s activation geo and countries', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = f.client(BERLIN);
    expect(
      (await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid('geo-key') }))
        .status,
    ).toBe(200);
    const [row] = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items;
    expect(row).toMatchObject({
      known_countries: ['DE'],
      activation_geo: { country: 'DE', city: 'Berlin (Friedrichshain-Kreuzberg)', region: 'Berlin' },
    });
    expect(row.last_geo).toEqual(row.activation_geo);
  });
});

describe('hiding without view_ip (docs/spec.md "Reseller scoping and hiding" rule 3, docs/protocol.md 11.17)', () => {
  it('removes ip, known_countries, geo fields and log locations; they are absent, not empty', async () => {
    const f = await appFixture(t);
    const perms = { view_keys: true, view_auth_logs: true, generate_keys: true, view_hwid: true };
    const blind = await f.owner.post('/api/team', {
      username: 'geo-blind',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: perms,
    });
    const sighted = await f.owner.post('/api/team', {
      username: 'geo-sighted',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { ...perms, view_ip: true },
    });
    expect([blind.status, sighted.status]).toEqual([200, 200]);
    const sellerBlind = await new Api(t.base).signIn('geo-blind', 'seller-pass-1');
    const sellerSighted = await new Api(t.base).signIn('geo-sighted', 'seller-pass-1');
    // The blind reseller's key, so both scoping and hiding apply to what it sees.
    const key = (await sellerBlind.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 })).body[0].key;
    const c = f.client(LONDON);
    expect(
      (
        await c.post('/api/client/register', {
          session: await f.session(c),
          username: 'geo-hidden',
          password: 'pw-geo-123',
          license: key,
          hwid: hwid('h'),
        })
      ).status,
    ).toBe(200);

    const u = await userRow(sellerBlind, f, 'geo-hidden');
    expect(u).toBeDefined();
    for (const field of ['ip', 'known_countries']) expect(u).not.toHaveProperty(field);
    for (const g of ['geo', 'last_geo', 'activation_geo']) expect(u[g]).toEqual({});
    const [k] = (await sellerBlind.get(`/api/apps/${f.app.id}/licenses`)).body.items;
    for (const field of ['ip', 'known_countries']) expect(k).not.toHaveProperty(field);
    expect(k.activation_geo).toEqual({});
    const [log] = (await sellerBlind.get(`/api/apps/${f.app.id}/logs?action=client.register`)).body;
    expect(log).toBeDefined();
    expect(log).not.toHaveProperty('location');
    expect(log).not.toHaveProperty('ip');

    // The same, for a reseller holding view_ip (its own key, since resellers see only their records).
    const key2 = (await sellerSighted.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 })).body[0].key;
    const c2 = f.client(LONDON);
    expect(
      (
        await c2.post('/api/client/register', {
          session: await f.session(c2),
          username: 'geo-seen',
          password: 'pw-geo-123',
          license: key2,
          hwid: hwid('s'),
        })
      ).status,
    ).toBe(200);
    const seen = await userRow(sellerSighted, f, 'geo-seen');
    expect(seen).toMatchObject({
      ip: LONDON,
      known_countries: ['GB'],
      activation_geo: { country: 'GB', city: 'London' },
    });
    const [seenLog] = (await sellerSighted.get(`/api/apps/${f.app.id}/logs?action=client.register`)).body;
    expect(seenLog.location).toBe('London, England, GB');
  });
});

describe('new device or new location alert (docs/spec.md "Alert webhook" rule 1)', () => {
  it('a login from a new country or a new HWID writes a warning client.alert and marks the webhook; a familiar one does not', async () => {
    const f = await appFixture(t, { webhook: `${hookBase}/alerts` });
    await register(f, LONDON, 'geo-alert');
    const registered = await nextHit((h) => h.body.event === 'client.register' && h.body.data.username === 'geo-alert');
    expect(registered.body.data).toMatchObject({
      alert: [],
      new_location: false,
      location: 'London, England, GB',
      geo: { country: 'GB' },
    });

    await login(f, MOUNTAIN_VIEW, 'geo-alert');
    const moved = await nextHit((h) => h.body.event === 'client.login' && h.body.data.ip === MOUNTAIN_VIEW);
    expect(moved.body.data).toMatchObject({
      alert: ['new_location'],
      new_location: true,
      new_device: false,
      location: 'Mountain View, California, US',
      geo: { country: 'US', city: 'Mountain View' },
    });

    await login(f, MOUNTAIN_VIEW, 'geo-alert', hwid('another-device'));
    const device = await nextHit((h) => h.body.event === 'client.login' && h.body.data.hwid === hwid('another-device'));
    expect(device.body.data).toMatchObject({ alert: ['new_device'], new_device: true, new_location: false });

    await login(f, LONDON, 'geo-alert');
    const familiar = await nextHit((h) => h.body.event === 'client.login' && h.body.data.ip === LONDON);
    expect(familiar.body.data).toMatchObject({ alert: [], new_device: false, new_location: false });

    const alerts = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=client.alert`)).body as {
      level: string;
      detail: string;
      location: string;
      ip: string;
    }[];
    expect(alerts.map((a) => [a.level, a.detail, a.location])).toEqual([
      ['warning', 'client.login of user geo-alert from a new device', 'Mountain View, California, US'],
      ['warning', 'client.login of user geo-alert from a new location', 'Mountain View, California, US'],
    ]);
  });

  it('a license-only key: its first activation is no alert; a later use from another device and country is', async () => {
    const f = await appFixture(t, { webhook: `${hookBase}/key-alerts` });
    const [key] = await f.keys(1);
    const first = f.client(AMSTERDAM);
    expect(
      (await first.post('/api/client/license', { session: await f.session(first), license: key, hwid: hwid('k1') }))
        .status,
    ).toBe(200);
    const activated = await nextHit((h) => h.path === '/key-alerts' && h.body.data.hwid === hwid('k1'));
    expect(activated.body.data).toMatchObject({
      alert: [],
      new_device: true,
      key_preview: `${key!.slice(0, 4)}****${key!.slice(-4)}`,
    });

    const second = f.client(BERLIN);
    expect(
      (await second.post('/api/client/license', { session: await f.session(second), license: key, hwid: hwid('k2') }))
        .status,
    ).toBe(200);
    const used = await nextHit((h) => h.path === '/key-alerts' && h.body.data.hwid === hwid('k2'));
    expect(used.body.data).toMatchObject({
      alert: ['new_device', 'new_location'],
      location: 'Berlin (Friedrichshain-Kreuzberg), Berlin, DE',
    });
    const [alert] = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=client.alert`)).body;
    expect(alert).toMatchObject({
      level: 'warning',
      detail: expect.stringContaining('from a new device and a new location'),
    });
  });
});
