// What each role sees (docs/spec.md "Dashboard roles" rule 2: tabs, default tab, stats tiles) in a real Chromium,
// the reseller's price preview with the refusal before sending (docs/spec.md "Key generation" rule 5), and
// a member whose session was ended elsewhere landing on the sign-in form with the reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { Api } from '../helpers/http.js';
import { OWNER } from '../helpers/server.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

const ALL_TABS = ['Licenses', 'Users', 'Security', 'Logs', 'Integration', 'Products', 'Releases', 'Settings'];

describe.skipIf(!hasChromium)('web dashboard: roles, tabs and reseller prices', () => {
  let t: TestServer;
  let b: Chromium;
  let f: AppFixture;
  let seq = 0;

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t, { key_costs: { 'days:30': 10 } });
    await f.keys(2, { note: 'seen by managers' });
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  /** A member created by the owner through the API, signed in in a fresh browser context, on the app's page. */
  async function open(member: {
    role?: 'admin' | 'reseller';
    permissions?: Record<string, boolean>;
    key_quota?: number;
  }): Promise<{ page: Page; username: string; id: string; context: BrowserContext; close: () => Promise<void> }> {
    const username = `member-${++seq}`;
    const password = 'member-pass-1';
    const r = await f.owner.post('/api/team', { username, password, allowed_apps: [f.app.id], ...member });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const { page, context } = await newPage(b);
    await signIn(page, t.base, username, password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}`);
    await page.getByRole('navigation', { name: 'Application sections' }).waitFor();
    return { page, username, id: r.body.id, context, close: () => context.close() };
  }

  async function tabs(page: Page): Promise<string[]> {
    return page.getByRole('navigation', { name: 'Application sections' }).getByRole('link').allTextContents();
  }
  async function currentTab(page: Page): Promise<string> {
    await page.waitForURL(/\/dashboard\/apps\/[^/]+\/[a-z]+$/);
    return (await page.locator('.tab[aria-current="page"]').textContent()) ?? '';
  }

  it('owner: every tab, Licenses by default, stats tiles', async () => {
    const { page, context } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}`);
    expect(await currentTab(page)).toBe('Licenses');
    expect(await tabs(page)).toEqual(ALL_TABS);
    await page.locator('dl[aria-label="Statistics"]').waitFor();
    await context.close();
  });

  it('admin: every tab, Licenses by default, stats tiles', async () => {
    const { page, close } = await open({ role: 'admin' });
    expect(await currentTab(page)).toBe('Licenses');
    expect(await tabs(page)).toEqual(ALL_TABS);
    await page.locator('dl[aria-label="Statistics"]').waitFor();
    await close();
  });

  it('reseller without permissions: Integration only, no stats, no secret, no SDK downloads; other tabs fall back', async () => {
    const { page, close } = await open({});
    expect(await currentTab(page)).toBe('Integration');
    expect(await tabs(page)).toEqual(['Integration']);
    await page.getByTestId('api-key').waitFor();
    expect(await page.getByTestId('api-secret').count()).toBe(0);
    expect(await page.getByRole('link', { name: /^Download/ }).count()).toBe(0);
    expect(await page.locator('dl[aria-label="Statistics"]').count()).toBe(0);
    // Typing a forbidden tab's address lands on the default tab instead.
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.waitForURL(/\/integration$/);
    await screenshot(page, 'reseller-integration');
    await close();
  });

  it('reseller with view_keys: Licenses and Users, Licenses by default, no key actions it lacks', async () => {
    const { page, close } = await open({ permissions: { view_keys: true } });
    expect(await currentTab(page)).toBe('Licenses');
    expect(await tabs(page)).toEqual(['Licenses', 'Users', 'Integration']);
    await page.getByTestId('licenses-table').waitFor();
    expect(await page.getByRole('button', { name: 'Generate keys' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Extend all' }).count()).toBe(0);
    expect(await page.locator('dl[aria-label="Statistics"]').count()).toBe(0);
    await close();
  });

  it('reseller with view_blocked_ips: Security; with view_auth_logs: Logs; Integration stays the default', async () => {
    const sec = await open({ permissions: { view_blocked_ips: true } });
    expect(await currentTab(sec.page)).toBe('Integration');
    expect(await tabs(sec.page)).toEqual(['Security', 'Integration']);
    await sec.page.getByRole('link', { name: 'Security' }).click();
    await sec.page.getByText('Nothing is blocked').waitFor();
    expect(await sec.page.getByRole('form', { name: 'Block an IP or HWID' }).count()).toBe(0); // resellers cannot mutate the blacklist
    await sec.close();

    const logs = await open({ permissions: { view_auth_logs: true } });
    expect(await currentTab(logs.page)).toBe('Integration');
    expect(await tabs(logs.page)).toEqual(['Logs', 'Integration']);
    await logs.close();
  });

  it('reseller with view_stats: the stats tiles', async () => {
    const { page, close } = await open({ permissions: { view_stats: true } });
    await page.locator('dl[aria-label="Statistics"]').waitFor();
    expect(await tabs(page)).toEqual(['Integration']);
    await close();
  });

  it('reseller generating keys: sees the price, is refused over its balance before anything is sent', async () => {
    const { page, close, username } = await open({
      permissions: { view_keys: true, generate_keys: true },
      key_quota: 25,
    });
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/licenses')) posts.push(r.url());
    });
    await page.getByRole('button', { name: 'Generate keys' }).click();
    await page.getByLabel('Amount').fill('3');
    await page.getByLabel('Duration').fill('30');
    const price = page.getByTestId('price');
    await price.getByText('Not enough credits').waitFor();
    expect(await price.textContent()).toContain('Price: 10 credits per key × 3 = 30 credits. Balance: 25.');
    expect(await page.getByRole('button', { name: 'Generate', exact: true }).isDisabled()).toBe(true);
    await page.getByLabel('Amount').press('Enter'); // submitting the form another way is refused too
    await screenshot(page, 'reseller-price-refused');
    expect(posts).toHaveLength(0);

    // 45 days: no exact tier, so ceil(45 / 30 * 10) = 15 per key.
    await page.getByLabel('Amount').fill('1');
    await page.getByLabel('Duration').fill('45');
    await price.getByText('Price: 15 credits per key × 1 = 15 credits. Balance: 25.').waitFor();
    await page.getByLabel('Duration').fill('30');
    await page.getByLabel('Amount').fill('2');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.getByTestId('generated-keys').waitFor();
    expect(posts).toHaveLength(1);
    await page.getByRole('button', { name: 'Done' }).click();
    // The balance the page shows is the server's new one.
    await price.getByText('Balance: 5.').waitFor();
    const me = (await new Api(t.base).signIn(username, 'member-pass-1')).get('/api/auth/me');
    expect((await me).body.account.credits).toBe(5);
    await close();
  });

  it('a member whose session was ended lands on the sign-in form with the reason: live stream closed, a 401, another tab', async () => {
    const { page, username, id, context, close } = await open({ role: 'admin' });
    const reason = page.getByTestId('signed-out-reason');
    await page.getByText('● Live').waitFor();
    // Disabling the member ends its sessions: the server closes the live stream (1008), the page asks who it is.
    expect((await f.owner.patch(`/api/team/${id}`, { enabled: false })).status).toBe(200);
    await reason.getByText(/^Your session was ended by an administrator/).waitFor({ timeout: 20_000 });
    expect(await page.title()).toBe('Sign in · Keywarden');

    // On a page without a live stream, the next call's 401 says the same.
    expect((await f.owner.patch(`/api/team/${id}`, { enabled: true })).status).toBe(200);
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill('member-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByRole('heading', { name: 'Change password' }).waitFor();
    expect(await reason.count()).toBe(0);
    expect((await f.owner.post(`/api/team/${id}/password`, { password: 'member-pass-1' })).status).toBe(200);
    await page.getByRole('link', { name: 'Team' }).click();
    await reason.getByText(/^Your session was ended by an administrator/).waitFor();

    // Signing out in one tab: the other tab of the same browser says so when it next checks.
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill('member-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    const other = await context.newPage();
    await other.goto(`${t.base}/dashboard/account`);
    await other.getByRole('button', { name: 'Sign out' }).click();
    await reason.getByText('You signed out in another tab.').waitFor();
    await close();
  });
});
