// docs/protocol.md 10: activation webhooks with resolution order, signatures, retries and audit lines;
// screenshots; and the per-app SDK archive.
import http from 'node:http';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { unzipSync, strFromU8 } from 'fflate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';

interface Hit {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let t: TestServer;
let receiver: WebhookReceiver<Hit>;
let hookBase: string;
const nextHit = (match: (h: Hit) => boolean) => receiver.nextHit(match);

beforeAll(async () => {
  receiver = await startWebhookReceiver();
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

function verify(hit: Hit, secret: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(hit.headers['x-keywarden-signature']));
  if (!m) return false;
  return createHmac('sha256', secret).update(`${m[1]}.${hit.body}`).digest('hex') === m[2];
}

describe('activation webhooks', () => {
  it('fires the app webhook on license activation, signed with the app owner’s secret, retrying failures', async () => {
    const f = await appFixture(t, { webhook: `${hookBase}/app-hook` });
    receiver.failures.set('/app-hook', 2); // answered 500 twice before 204
    const [key] = await f.keys(1);
    const c = f.client('203.0.113.50');
    await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid('wh') });
    const hit = await nextHit((h) => h.path === '/app-hook');
    const secret = (await f.owner.get('/api/auth/me')).body.account.webhook_secret;
    expect(verify(hit, secret)).toBe(true);
    const payload = JSON.parse(hit.body);
    expect(payload).toMatchObject({
      event: 'client.license',
      app_id: f.app.id,
      id: expect.any(String),
      occurred_at: expect.any(String),
      data: { hwid: hwid('wh'), ip: '203.0.113.50', new_device: true },
    });
    await t.server.app.domain.notify.webhooks.drain();
    const attempts = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=webhook.delivery`)).body.map(
      (l: { detail: string }) => l.detail,
    );
    expect(attempts).toHaveLength(3);
    expect(attempts[2]).toContain('attempt 1: HTTP 500');
    expect(attempts[0]).toContain('attempt 3: HTTP 204');
  });

  it("without an app webhook, a reseller's key goes to the reseller's default, else to the owner's global webhook", async () => {
    const f = await appFixture(t);
    await f.owner.patch('/api/account/webhook', { webhook: `${hookBase}/global` });
    // view_hwid: a reseller's webhook shows only what the reseller may see (discord-webhooks.test.ts).
    const member = await f.owner.post('/api/team', {
      username: 'hookseller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { generate_keys: true, view_hwid: true },
    });
    await f.owner.patch(`/api/team/${member.body.id}/webhook`, { webhook: `${hookBase}/member` });
    const seller = await new Api(t.base).signIn('hookseller', 'seller-pass-1');
    const sellerKey = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 })).body[0].key;
    const [ownerKey] = await f.keys(1);
    const c = f.client();
    const s = await f.session(c);
    await c.post('/api/client/license', { session: s, license: sellerKey, hwid: hwid('m') });
    await c.post('/api/client/license', { session: s, license: ownerKey, hwid: hwid('o') });
    const memberHit = await nextHit((h) => h.path === '/member' && JSON.parse(h.body).data.hwid === hwid('m'));
    const globalHit = await nextHit((h) => h.path === '/global' && JSON.parse(h.body).data.hwid === hwid('o'));
    const sellerMe = (await seller.get('/api/auth/me')).body.account.webhook_secret;
    // No view_ip: the reseller's webhook carries no address or location, and its geo nothing derived
    // from the address (the rule of every channel: access/visibility.ts).
    const memberData = JSON.parse(memberHit.body).data;
    for (const hidden of ['ip', 'location']) expect(memberData).not.toHaveProperty(hidden);
    for (const hidden of ['ip', 'city', 'region', 'country', 'lat', 'lon'])
      expect(memberData.geo ?? {}).not.toHaveProperty(hidden);
    expect(JSON.parse(globalHit.body).data).toHaveProperty('ip');
    expect(verify(memberHit, sellerMe)).toBe(true);
    expect(verify(globalHit, (await f.owner.get('/api/auth/me')).body.account.webhook_secret)).toBe(true);
    await f.owner.patch('/api/account/webhook', { webhook: '' });
  });
});

describe('screenshots', () => {
  it('stores an activation screenshot under DATA_DIR and records its path; bad base64 is 422', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(100, 1)]);
    const c = f.client();
    const s = await f.session(c);
    expect(
      (
        await c.post('/api/client/register', {
          session: s,
          username: 'snap',
          password: 'pw-snap-1',
          license: key,
          hwid: hwid(),
          screenshot: 'not base64!',
        })
      ).status,
    ).toBe(422);
    const ok = await c.post('/api/client/register', {
      session: s,
      username: 'snap',
      password: 'pw-snap-1',
      license: key,
      hwid: hwid(),
      screenshot: png.toString('base64'),
    });
    expect(ok.status).toBe(200);
    const [u] = await f.sql('select activation_screenshot_path from end_users where username = $1 and app_id = $2', [
      'snap',
      f.app.id,
    ]);
    expect(u.activation_screenshot_path).toMatch(new RegExp(`^screenshots/${f.app.id}/[0-9a-f-]+\\.png$`));
    expect(fs.readFileSync(path.join(t.dataDir, u.activation_screenshot_path)).equals(png)).toBe(true);
  });
});

describe('SDK archive', () => {
  it('streams svc_sdk_<lang>.zip with the app configuration; other langs are 422', async () => {
    const f = await appFixture(t, { require_signature: true });
    const res = await fetch(`${t.base}/apps/${f.app.id}/sdk/python`, {
      headers: { authorization: `Bearer ${f.owner.token}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="svc_sdk_python.zip"');
    const files = unzipSync(new Uint8Array(await res.arrayBuffer()));
    const config = JSON.parse(strFromU8(files['svc_sdk_python/keywarden.json']!));
    expect(config).toMatchObject({
      format: 1,
      api_key: f.app.api_key,
      api_secret: f.app.api_secret,
      response_keys: [{ kid: 'k1', alg: 'Ed25519' }],
    });
    for (const lang of ['csharp', 'cpp', 'typescript'])
      expect((await f.owner.get(`/api/apps/${f.app.id}/sdk/${lang}`)).status).toBe(200);
    expect((await f.owner.get(`/api/apps/${f.app.id}/sdk/rust`)).status).toBe(422);
  });
});
