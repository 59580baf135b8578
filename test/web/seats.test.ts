// Floating seats in the web dashboard (docs/protocol.md 12.2) in a real Chromium: max_sessions and
// session_overflow in Settings (a 422 next to its field), max_sessions in the generator, and the
// Sessions column of key rows showing a live session.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { Api } from '../helpers/http.js';
import { appFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';
import { hasChromium, launchChromium, newPage, signIn, type Chromium } from './browser.js';

function errorOf(page: Page, label: string): Locator {
  return page
    .locator('.field, .switch-field')
    .filter({ has: page.getByLabel(label, { exact: true }) })
    .locator('.field-error');
}

describe.skipIf(!hasChromium)('web dashboard: floating seats', () => {
  let t: TestServer;
  let b: Chromium;
  let owner: Api;

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  it('edits the seat settings, generates keys with their own bound, and shows live sessions on key rows', async () => {
    const f = await appFixture(t);
    const { page, context } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/settings`);
    const seats = page.getByLabel('Concurrent sessions per key');
    expect(await seats.inputValue()).toBe('0');
    await seats.fill('1001');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await errorOf(page, 'Concurrent sessions per key').waitFor();
    expect((await owner.get(`/api/apps/${f.app.id}`)).body.max_sessions).toBe(0);
    await seats.fill('5');
    await page.getByLabel('When every seat is taken').selectOption('kick_oldest');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved').waitFor();
    expect((await owner.get(`/api/apps/${f.app.id}`)).body).toMatchObject({
      max_sessions: 5,
      session_overflow: 'kick_oldest',
    });

    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByRole('button', { name: 'Generate keys' }).click();
    await page.getByLabel('Amount').fill('1');
    await page.getByLabel('Concurrent sessions').fill('3');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const box = page.getByTestId('generated-keys');
    await box.waitFor();
    const key = (await box.inputValue()).trim();
    await page.getByRole('button', { name: 'Done' }).click();
    const rows = (await owner.get(`/api/apps/${f.app.id}/licenses`)).body.items;
    expect(rows).toHaveLength(1);
    expect(rows[0].max_sessions).toBe(3);

    // A live heartbeat session of the key shows in its row.
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: 'system-0001' })).status).toBe(200);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByTestId('live-sessions').first().waitFor();
    expect(await page.getByTestId('live-sessions').first().textContent()).toBe('1 / 3');
    await context.close();
  }, 120_000);
});
