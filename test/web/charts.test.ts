// Charts in a real Chromium against a real server: the Overview page across the caller's applications
// (a reseller sees only its allowed application and its own numbers) and the chart panel on an
// application page, drawn by uPlot on canvas from real activations and heartbeats, under the
// dashboard's CSP with no violation reported (securitypolicyviolation events and console errors).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';
import { Api } from '../helpers/http.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

const SYS = 'system-charts-1';
const HASH = 'feed'.repeat(8);

describe.skipIf(!hasChromium)('web dashboard: charts', () => {
  let t: TestServer;
  let b: Chromium;
  let a: AppFixture;
  let other: AppFixture;

  /** Activates `key` (one activation) and sends `beats` accepted heartbeats. */
  async function activity(f: AppFixture, key: string, beats: number) {
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    let token = start.body.token as string;
    for (let i = 1; i <= beats; i++) {
      const r = await c.post('/api/client/heartbeat', {
        session,
        token,
        system_id: SYS,
        beat_index: i,
        code_hash: HASH,
      });
      expect(r.status).toBe(200);
      token = r.body.new_token;
    }
  }

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    a = await appFixture(t);
    other = await appFixture(t);
    const seller = await a.owner.post('/api/team', {
      username: 'chartseller',
      password: 'seller-pass-1',
      allowed_apps: [a.app.id],
      key_quota: 10,
      permissions: { generate_keys: true, view_stats: true },
    });
    expect(seller.status).toBe(200);
    const reseller = await new Api(t.base).signIn('chartseller', 'seller-pass-1');
    const sellerKey = (await reseller.post(`/api/apps/${a.app.id}/licenses`, { amount: 1, duration: 30, unit: 'days' }))
      .body[0].key;
    const [ownerKey] = await a.keys(1);
    await activity(a, ownerKey!, 3);
    await activity(a, sellerKey, 2);
    await t.server.services.audit.repository.flush();
    await t.server.app.domain.heartbeat.beatCounts.flush();
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  /** A signed-in page that records every CSP violation the document reports. */
  async function pageOf(username: string, password: string): Promise<{ page: Page; errors: string[] }> {
    const { context, page, errors } = await newPage(b);
    await context.addInitScript(() => {
      const w = window as unknown as { cspViolations: string[] };
      w.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) =>
        w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`),
      );
    });
    await signIn(page, t.base, username, password);
    errors.length = 0; // the signed-out /api/auth/me answers 401 before the sign-in, as it should
    return { page, errors };
  }

  async function noViolations(page: Page, errors: string[]): Promise<void> {
    expect(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations)).toEqual([]);
    expect(errors).toEqual([]);
  }

  /** Pixels the chart's canvas has painted (not transparent). */
  async function painted(page: Page, selector: string): Promise<number> {
    return page.$eval(selector, (box) => {
      const canvas = box.querySelector('canvas')!;
      const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) n++;
      return n;
    });
  }

  it("draws the overview of the owner's applications with their totals, under the CSP", async () => {
    const { page, errors } = await pageOf(OWNER.username, OWNER.password);
    expect((await page.request.get(`${t.base}/dashboard/overview`)).headers()['content-security-policy']).toContain(
      "style-src 'self'",
    );
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    const card = `li[data-app="${a.app.id}"]`;
    await page.waitForSelector(`${card} [data-drawn="true"]`);
    expect(await page.textContent(`${card} [data-metric="activations"] dd`)).toBe('2');
    expect(await page.textContent(`${card} [data-metric="beats"] dd`)).toBe('5');
    expect(await page.getAttribute(`${card} [role="img"]`, 'data-total')).toBe('7');
    expect(await page.getAttribute(`${card} [role="img"]`, 'data-points')).toBe('30');
    expect(await painted(page, `${card} [role="img"]`)).toBeGreaterThan(0);
    expect(await page.textContent(`li[data-app="${other.app.id}"] [data-metric="beats"] dd`)).toBe('0');
    await page.waitForSelector('.overview-all [data-drawn="true"]');
    expect(await page.getAttribute('.overview-all [role="img"]', 'data-total')).toBe('7');
    await screenshot(page, 'charts-overview');
    await noViolations(page, errors);
  });

  it('shows a reseller only its allowed application and its own numbers', async () => {
    const { page, errors } = await pageOf('chartseller', 'seller-pass-1');
    await page.goto(`${t.base}/dashboard/overview`);
    const card = `li[data-app="${a.app.id}"]`;
    await page.waitForSelector(`${card} [data-drawn="true"]`);
    expect(await page.locator('li[data-app]').count()).toBe(1);
    expect(await page.textContent(`${card} [data-metric="activations"] dd`)).toBe('1');
    expect(await page.textContent(`${card} [data-metric="beats"] dd`)).toBe('2');
    await noViolations(page, errors);
  });

  it("draws an application's charts per metric, hourly too", async () => {
    const { page, errors } = await pageOf(OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${a.app.id}/licenses`);
    await page.getByText('Charts', { exact: true }).click();
    const beats = 'section[data-metric="beats"] [role="img"]';
    await page.waitForSelector(`section[data-metric="beats"] [data-drawn="true"]`);
    expect(await page.getAttribute(beats, 'data-total')).toBe('5');
    expect(await page.getAttribute(beats, 'data-points')).toBe('30');
    expect(await page.getAttribute('section[data-metric="activations"] [role="img"]', 'data-total')).toBe('2');
    expect(await painted(page, beats)).toBeGreaterThan(0);
    // The legend names the series; uPlot's stylesheet came with the bundle's CSS (its layout applies).
    expect(await page.textContent('section[data-metric="beats"] .u-legend')).toContain('Heartbeats');
    expect(await page.$eval('section[data-metric="beats"] .u-wrap', (e) => getComputedStyle(e).position)).toBe(
      'relative',
    );
    await page.getByLabel('Range').selectOption('24h');
    await page.waitForSelector(`section[data-metric="beats"] [data-points="24"][data-drawn="true"]`);
    expect(await page.getAttribute(beats, 'data-total')).toBe('5');
    await screenshot(page, 'charts-app');
    await noViolations(page, errors);
  });
});
