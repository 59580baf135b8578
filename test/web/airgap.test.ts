// Air-gapped machines in a real Chromium against a real server (docs/air-gapped.md): on the key's
// dialog an owner answers an activation request (pasted) and downloads the answer, then issues a seat
// pool and downloads it, a refused field shown at its field; in the portal a customer on a 390 px
// phone follows the two steps (upload the request file, save the answer), and the files verify under
// the published key with the request's nonce. `UPDATE_DOCS_SCREENSHOTS=1` writes the portal steps
// into docs/screenshots for docs/air-gapped.md.
import fs from 'node:fs';
import path from 'node:path';
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture } from '../helpers/fixture.js';
import { DESKTOP, DOCS_SHOTS, hasChromium, launchChromium, newPage, PHONE, signIn, type Chromium } from './browser.js';
import { activationRequest, verifiedPayload } from '../modules/airgap/airgap-harness.js';

const preview = (k: string) => `${k.slice(0, 4)}****${k.slice(-4)}`;

async function docsShot(l: Locator, name: string): Promise<void> {
  if (process.env.UPDATE_DOCS_SCREENSHOTS !== '1') return;
  fs.mkdirSync(DOCS_SHOTS, { recursive: true });
  await l.screenshot({ path: path.join(DOCS_SHOTS, `${name}.png`) });
}

describe.skipIf(!hasChromium)('air-gapped machines in the browser', () => {
  let t: TestServer;
  let b: Chromium;

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  }, 180_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  it("answers a request and issues a seat pool from the key's dialog", { timeout: 90_000 }, async () => {
    const f = await appFixture(t, { offline_days: 2 });
    const [key] = await f.keys(1);
    const { page, errors } = await newPage(b, DESKTOP);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByRole('button', { name: `Actions for ${preview(key!)}` }).click();
    await page
      .getByRole('menu', { name: `Actions for ${preview(key!)}` })
      .getByRole('menuitem', { name: 'Edit / details' })
      .click();
    const drawer = page.getByRole('dialog', { name: `Key ${preview(key!)}` });
    await drawer.waitFor();
    page.setDefaultTimeout(20_000);
    // A request for another application is refused at its field.
    const other = await appFixture(t);
    const box = drawer.getByRole('form', { name: 'Offline activation' });
    await box.getByLabel('Activation request').fill(activationRequest(other.app.id, key!, 'lab-machine-7').request);
    await box.getByRole('button', { name: 'Answer and download' }).click();
    await box.getByText('The request is for another application').waitFor();
    const { request, nonce } = activationRequest(f.app.id, key!, 'Lab-Machine-7');
    await box.getByLabel('Activation request').fill(request);
    const answered = page.waitForEvent('download');
    await box.getByRole('button', { name: 'Answer and download' }).click();
    const file = await answered;
    expect(file.suggestedFilename()).toBe('license-response.txt');
    const response = fs.readFileSync((await file.path())!, 'utf8').trim();
    expect(await verifiedPayload(f.owner, response, 'kwlic1')).toMatchObject({
      hwid: 'lab-machine-7',
      request_nonce: nonce,
    });

    const pools = drawer.getByRole('form', { name: 'Seat pools' });
    await pools.getByLabel('Relay id').fill('f973d819fa167f41c4f8cb2658a9e1f1');
    await pools.getByLabel('Seats').fill('0');
    await pools.getByRole('button', { name: 'Issue pool' }).click();
    await pools.locator('.field-error').first().waitFor();
    await pools.getByLabel('Seats').fill('50');
    await pools.getByLabel('Valid for (days)').fill('90');
    await pools.getByRole('button', { name: 'Issue pool' }).click();
    const poolBox = pools.getByRole('textbox', { name: 'Pool', exact: true });
    await poolBox.waitFor();
    const p = await verifiedPayload(f.owner, await poolBox.inputValue(), 'kwpool1');
    expect(p).toMatchObject({ seats: 50, relay_id: 'f973d819fa167f41c4f8cb2658a9e1f1', app_id: f.app.id });
    const saved = page.waitForEvent('download');
    await pools.getByRole('button', { name: 'Download pool' }).click();
    expect((await saved).suggestedFilename()).toBe(`${preview(key!).replace(/\*/g, '')}.kwpool`);
    expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    await page.context().close();
  });

  for (const [viewport, suffix] of [
    [PHONE, '-phone'],
    [DESKTOP, ''],
  ] as const) {
    it(`the portal's two steps: upload the request, save the answer (${viewport.width} px)`, async () => {
      const f = await appFixture(t, { portal_enabled: true, hwid_lock: true });
      const [key] = await f.keys(1);
      const { page, errors } = await newPage(b, viewport);
      await page.goto(`${t.base}/portal/?app=${f.app.api_key}`);
      await page.getByLabel('License key').fill(key!);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const section = page.getByRole('region', { name: 'Activate a machine without internet' });
      await section.waitFor();
      await expect(section.getByRole('button', { name: 'Activate' }).isDisabled()).resolves.toBe(true);
      const { request, nonce } = activationRequest(f.app.id, key!, 'Plant-Floor-PC-12');
      await section.getByLabel('Choose the request file').setInputFiles({
        name: 'activation-request.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from(`${request}\n`),
      });
      await expect.poll(() => section.getByLabel('Or paste its text').inputValue()).toBe(request);
      await section.scrollIntoViewIfNeeded();
      if (suffix) await docsShot(section, `portal-airgap-step1${suffix}`);
      await section.getByRole('button', { name: 'Activate' }).click();
      await section.getByText('Done: the machine is activated on your license.').waitFor();
      // The device list shows the machine now.
      await page.getByText('plant-floor-pc-12').first().waitFor();
      const download = page.waitForEvent('download');
      await section.getByRole('button', { name: 'Save the answer file' }).click();
      const saved = await download;
      expect(saved.suggestedFilename()).toBe('license-response.txt');
      const response = fs.readFileSync((await saved.path())!, 'utf8').trim();
      expect(await verifiedPayload(f.owner, response, 'kwlic1')).toMatchObject({
        hwid: 'plant-floor-pc-12',
        request_nonce: nonce,
      });
      await docsShot(section, suffix ? `portal-airgap-step2${suffix}` : 'portal-airgap');
      // A request of another key: refused in words, nothing changes.
      const [otherKey] = await f.keys(1);
      await section
        .getByLabel('Or paste its text')
        .fill(activationRequest(f.app.id, otherKey!, 'other-machine-1').request);
      await section.getByRole('button', { name: 'Activate' }).click();
      await section.getByRole('alert').getByText('The request is for another license key').waitFor();
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width).toBeLessThanOrEqual(viewport.width);
      expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
      await page.context().close();
    });
  }
});
