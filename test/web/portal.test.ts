// The customer portal in a real Chromium against a real server (docs/protocol.md 14): a customer signs in
// with its key on a phone-sized window, sees its license and device with localised dates, resets
// the device and then sees the cooldown as a time; where the application issues offline files it
// downloads one for its device as a .kwlic file that verifies under the published signing key; an
// end user changes its password; a buyer opens the order page after a signed Stripe event. The page
// runs under the dashboard's strict CSP.
import fs from 'node:fs';
import { createHmac, createPublicKey, randomUUID, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { Api } from '../helpers/http.js';
import { hasChromium, launchChromium, newPage, PHONE, screenshot, signIn, type Chromium } from './browser.js';
import { OWNER } from '../helpers/server.js';
import { pinKeys } from '../../sdk/typescript/src/verify.js';
import { verifyLicenseFile } from '../../sdk/typescript/src/offline.js';

describe.skipIf(!hasChromium)('customer portal', () => {
  let t: TestServer;
  let b: Chromium;
  let f: AppFixture;

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t, { portal_enabled: true });
  }, 180_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  it('signs a customer in with its key, shows the device and resets it with a cooldown (390 px)', async () => {
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: 'portal-pc-0001' })).status).toBe(200);
    const { page, errors } = await newPage(b, PHONE);
    const res = await page.goto(`${t.base}/portal/?app=${f.app.api_key}`);
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByLabel('License key').fill(key!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Your license' }).waitFor();
    await page.getByText(f.app.name as string).waitFor();
    await page.getByText('portal-pc-0001').waitFor();
    expect(await page.getByText('Active').count()).toBe(1);
    // This application issues no offline files: nothing to download.
    expect(await page.getByRole('button', { name: 'Download offline file' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Reset this device' }).click();
    await page
      .getByText(/Next reset possible/)
      .first()
      .waitFor();
    await page.getByText('No device is bound', { exact: false }).waitFor();
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(PHONE.width);
    await screenshot(page, 'portal-phone');
    const me = await new Api(t.base).get('/api/portal/me');
    expect(me.status).toBe(401);
    expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    await page.context().close();
  });

  it('downloads an offline license file for a device, signed as docs/protocol.md 12.5 says (390 px)', async () => {
    const g = await appFixture(t, { portal_enabled: true, offline_days: 5, hwid_lock: true });
    const [key] = await g.keys(1, { level: 4 });
    const c = g.client();
    const session = await g.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: 'Offline-PC-0001' })).status).toBe(200);
    const { page, errors } = await newPage(b, PHONE);
    await page.goto(`${t.base}/portal/?app=${g.app.api_key}`);
    await page.getByLabel('License key').fill(key!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('offline-pc-0001').waitFor();
    await page.getByText('without internet access run for 5 days', { exact: false }).waitFor();
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download offline file' }).click();
    const saved = await download;
    expect(saved.suggestedFilename()).toBe(`${key!.slice(0, 4)}-${key!.slice(-4)}.kwlic`);
    await page.getByText('Offline license file downloaded.').waitFor();
    const file = fs.readFileSync(await saved.path(), 'utf8').trim();
    const [tag, payloadB64, sigB64] = file.split('.') as [string, string, string];
    expect(tag).toBe('kwlic1');
    const payload = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8'));
    expect(payload).toMatchObject({ v: 1, app_id: g.app.id, hwid: 'offline-pc-0001', level: 4, user: null });
    expect(Date.parse(payload.valid_until) - Date.parse(payload.issued_at)).toBe(5 * 86_400_000);
    // The signature, by the published key the payload names, and the TypeScript SDK's own check.
    const published = (await g.owner.get('/api/client/keys')).body.keys as { kid: string; public_key: string }[];
    const pub = published.find((k) => k.kid === payload.kid)!;
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(pub.public_key, 'base64')]);
    const publicKey = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    expect(
      verify(null, Buffer.from(`kwlic1.${payloadB64}`, 'ascii'), publicKey, Buffer.from(sigB64, 'base64url')),
    ).toBe(true);
    const keys = pinKeys(published.map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: k.public_key }) as never));
    expect(verifyLicenseFile(file, keys, g.app.id, 'offline-pc-0001', Date.now(), undefined).level).toBe(4);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width);
    await screenshot(page, 'portal-offline-phone');
    expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    await page.context().close();
  });

  it('an end user signs in with its name and changes its password', async () => {
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    const reg = await c.post('/api/client/register', {
      session,
      username: 'webuser',
      password: 'web-pass-1',
      license: key,
      hwid: 'portal-pc-0002',
    });
    expect(reg.status).toBe(200);
    const { page } = await newPage(b, PHONE);
    await page.goto(`${t.base}/portal/?app=${f.app.api_key}`);
    await page.getByRole('button', { name: 'Username' }).click();
    await page.getByLabel('Username').fill('webuser');
    await page.getByLabel('Password').fill('wrong-pass');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('Invalid credentials').waitFor();
    await page.getByLabel('Password').fill('web-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Change password' }).waitFor();
    await page.getByLabel('Current password').fill('web-pass-1');
    await page.getByLabel('New password').fill('web-pass-2');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed.').waitFor();
    await page.context().close();
    const login = await new Api(t.base).post(
      '/api/portal/login',
      { api_key: f.app.api_key, username: 'webuser', password: 'web-pass-2' },
      { token: '' },
    );
    expect(login.status).toBe(200);
  });

  it("shows a buyer the order's keys after a signed Stripe event", async () => {
    const product = (await f.owner.post(`/api/apps/${f.app.id}/products`, { name: 'Web plan', duration: 30 })).body;
    const sessionId = `cs_test_${randomUUID().replace(/-/g, '')}`;
    const body = JSON.stringify({
      id: `evt_${randomUUID()}`,
      type: 'checkout.session.completed',
      data: { object: { id: sessionId, customer_details: { email: 'b@example.com' }, metadata: { quantity: '2' } } },
    });
    const ts = Math.floor(Date.now() / 1000);
    const sig = createHmac('sha256', product.webhook_secret).update(`${ts}.${body}`).digest('hex');
    const r = await new Api(t.base).call('POST', `/api/fulfil/stripe/${product.id}`, undefined, {
      rawBody: body,
      headers: { 'content-type': 'application/json', 'stripe-signature': `t=${ts},v1=${sig}` },
    });
    expect(r.status).toBe(200);
    const { page } = await newPage(b, PHONE);
    await page.goto(`${t.base}/portal/orders/${sessionId}`);
    await page.getByRole('heading', { name: 'Web plan' }).waitFor();
    expect(await page.locator('.keys li').count()).toBe(2);
    await page.goto(`${t.base}/portal/orders/cs_unknown`);
    await page.getByText('Order not found').waitFor();
    await page.context().close();
  });

  it('the dashboard Products tab creates a product, shows its webhook URL and lists orders by preview', async () => {
    const { page, errors } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/products`);
    await page.getByRole('heading', { name: 'New product' }).waitFor();
    await page.getByLabel('Name').fill('Tab plan');
    await page.getByLabel('Entitlements').fill('export, cloud');
    await page.getByRole('button', { name: 'Create product' }).click();
    await page.getByRole('heading', { name: 'Tab plan' }).waitFor();
    await page
      .getByText(/\/api\/fulfil\/stripe\//)
      .first()
      .waitFor();
    await page.getByText('export, cloud').waitFor();
    // The order of the previous test is listed with its keys' previews, never the keys.
    await page.getByText('Web plan').first().waitFor();
    expect(
      await page
        .locator('table')
        .getByText(/\*\*\*\*/)
        .count(),
    ).toBeGreaterThan(0);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/integration`);
    expect(await page.getByRole('link', { name: 'Customer portal' }).getAttribute('href')).toContain('/portal/?app=');
    expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    await page.context().close();
  });
});
