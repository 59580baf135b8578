// The operators' security features in a real Chromium against a real server (docs/protocol.md 13): setting
// up two-factor sign-in from Account > Security (the QR code drawn under the strict CSP, the test
// computing the TOTP codes itself, the recovery codes downloaded), signing in with a code and with
// a recovery code, a wrong code refused, creating an API token shown once and revoking it, the
// Actor column of the Logs tab (an API token's change marked "via token"), a member held at the
// two-factor page by its owner's policy, and each member's two-factor state on the Team page.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { Api } from '../helpers/http.js';
import { totp } from '../helpers/totp.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

describe.skipIf(!hasChromium)('web dashboard: two-factor, tokens and actors', () => {
  let t: TestServer;
  let b: Chromium;
  let owner: Api;
  let appId: string;
  let secret = '';
  let recovery: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer();
    owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    appId = (await owner.post('/api/apps', { name: 'Operated' })).body.id;
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  async function page(): Promise<Page> {
    const { page: p, errors } = await newPage(b);
    // Refused requests (401 while asking for the code) are logged by Chromium as "Failed to load resource".
    p.on('close', () => pageErrors.push(...errors.filter((e) => !/^Failed to load resource/.test(e))));
    return p;
  }

  /** Signs in through the form; `otp` is typed at the second step when the server asks for it. */
  async function signInWithCode(p: Page, otp: string): Promise<void> {
    await p.goto(`${t.base}/dashboard/`);
    await p.getByLabel('Username').fill(OWNER.username);
    await p.getByLabel('Password').fill(OWNER.password);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByLabel('Two-factor code').fill(otp);
    await p.getByRole('button', { name: 'Sign in' }).click();
  }

  it('sets up two-factor sign-in from Account > Security with a QR code and keeps the recovery codes', async () => {
    const p = await page();
    await signIn(p, t.base, OWNER.username, OWNER.password);
    await p.getByRole('link', { name: 'Account' }).click();
    await p.getByRole('link', { name: 'Security' }).click();
    await p.getByRole('heading', { name: /Two-factor sign-in/ }).waitFor();
    await p.getByRole('button', { name: 'Set up two-factor' }).click();
    const qr = p.getByAltText('QR code to scan with your authenticator app');
    await qr.waitFor();
    expect(await qr.getAttribute('src')).toMatch(/^data:image\/svg\+xml;charset=utf-8,%3Csvg/);
    expect(await qr.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
    secret = (await p.getByTestId('totp-secret').textContent())!.trim();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);

    await p.getByLabel('Code from the app').fill('000000');
    await p.getByRole('button', { name: 'Turn on two-factor' }).click();
    await p.getByRole('alert').filter({ hasText: 'Invalid two-factor code' }).waitFor();
    await p.getByLabel('Code from the app').fill(totp(secret));
    await p.getByRole('button', { name: 'Turn on two-factor' }).click();
    const list = p.getByRole('list', { name: 'Recovery codes' });
    await list.waitFor();
    recovery = (await list.locator('code').allTextContents()).map((c) => c.trim());
    expect(recovery).toHaveLength(10);
    const download = p.waitForEvent('download');
    await p.getByRole('button', { name: 'Download codes' }).click();
    expect(fs.readFileSync(await (await download).path(), 'utf8')).toBe(`${recovery.join('\n')}\n`);
    await screenshot(p, 'security-recovery-codes');
    await p.getByRole('button', { name: 'Done' }).click();
    await p.getByRole('heading', { name: /Two-factor sign-in\s*on/ }).waitFor();
    expect((await owner.get('/api/auth/me')).status).toBe(401); // enabling ended the other sessions
    await p.close();
  }, 60_000);

  it('signs in with a code, refuses a wrong one, and takes a recovery code once', async () => {
    const p = await page();
    await signInWithCode(p, '123456');
    await p.getByRole('alert').filter({ hasText: 'Invalid two-factor code' }).waitFor();
    await p.getByLabel('Two-factor code').fill(totp(secret, 1)); // the enable spent this step's code
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
    await p.getByRole('button', { name: 'Sign out', exact: true }).click();

    await signInWithCode(p, recovery[0]!);
    await p.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
    await p.goto(`${t.base}/dashboard/account/security`);
    await p.getByText('9 recovery codes left').waitFor();
    // The sessions and sign-ins lists show this browser.
    await p.getByRole('region', { name: 'Active sessions' }).getByText('this session').waitFor();
    await p.getByRole('region', { name: 'Recent sign-ins' }).getByText('failed').first().waitFor();
    await p.getByRole('button', { name: 'Sign out', exact: true }).click();

    await signInWithCode(p, recovery[0]!);
    await p.getByRole('alert').filter({ hasText: 'Invalid two-factor code' }).waitFor();
    await p.close();
  }, 60_000);

  it('creates an API token shown once, and revokes it', async () => {
    const api = await new Api(t.base).post('/api/auth/login', { ...OWNER, otp: recovery[1] }, { token: '' });
    owner = new Api(t.base, api.body.token);
    const p = await page();
    await signInWithCode(p, recovery[2]!);
    await p.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
    await p.goto(`${t.base}/dashboard/account/security`);
    const form = p.getByRole('form', { name: 'New API token' });
    await form.getByLabel('Token name').fill('shop');
    await form.getByRole('checkbox', { name: /apps:write/ }).check();
    await form.getByRole('checkbox', { name: /logs:read/ }).check();
    await form.getByRole('button', { name: 'Create token' }).click();
    const shown = p.getByTestId('new-token');
    await shown.waitFor();
    const token = (await shown.locator('code').textContent())!.trim();
    expect(token).toMatch(/^kwt_[A-Za-z0-9_-]{43}$/);
    await screenshot(p, 'security-token-created');
    await p.getByRole('button', { name: 'I have copied it' }).click();
    expect(await p.getByText(token).count()).toBe(0); // never shown again

    // The token works, as the owner, within its scopes: a ban, then the Logs tab names who did it.
    const bot = new Api(t.base, token);
    expect((await bot.get(`/api/apps/${appId}/licenses`)).status).toBe(403);
    expect((await bot.post(`/api/apps/${appId}/bans`, { type: 'hwid', value: 'banned-by-bot' })).status).toBe(200);
    expect((await owner.post(`/api/apps/${appId}/bans`, { type: 'hwid', value: 'banned-by-hand' })).status).toBe(200);
    const row = p.getByRole('region', { name: 'API tokens' }).getByRole('row', { name: /shop/ });
    await p.reload();
    await row.getByText('127.0.0.1').waitFor(); // last used from
    await row.getByRole('button', { name: 'Revoke shop' }).click();
    await p.getByText('Token revoked').waitFor();
    await row.waitFor({ state: 'detached' });
    expect((await bot.get('/api/apps')).body).toEqual({ detail: 'Invalid or expired token' });

    await p.goto(`${t.base}/dashboard/apps/${appId}/logs`);
    const table = p.getByTestId('logs-table');
    await table.getByRole('columnheader', { name: 'Actor' }).waitFor();
    const byBot = table.getByRole('row', { name: /hwid banned-by-bot blacklisted/ });
    await byBot.getByText('via token').waitFor();
    await byBot.getByText('owner').waitFor();
    const byHand = table.getByRole('row', { name: /hwid banned-by-hand blacklisted/ });
    await byHand.getByText('owner').waitFor();
    expect(await byHand.getByText('via token').count()).toBe(0);
    // Filtering by action and actor.
    await p.getByLabel('Action').fill('app.create');
    await p.getByRole('button', { name: 'Filter' }).click();
    await table.getByRole('row', { name: /app\.create/ }).waitFor();
    await table.getByRole('row', { name: /blacklist\.add/ }).waitFor({ state: 'detached' });
    await screenshot(p, 'logs-actor');
    await p.close();
  }, 60_000);

  it("holds a member at the two-factor page under its owner's policy, and shows 2FA state on Team", async () => {
    await owner.post('/api/team', { username: 'webmember', password: 'member-pass-1' });
    expect((await owner.patch('/api/account/security', { require_two_factor: true })).status).toBe(200);
    const p = await page();
    await signIn(p, t.base, 'webmember', 'member-pass-1');
    await p.getByRole('heading', { name: 'Set up two-factor sign-in' }).waitFor();
    await p.getByRole('button', { name: 'Set up two-factor' }).click();
    const memberSecret = (await p.getByTestId('totp-secret').textContent())!.trim();
    await p.getByLabel('Code from the app').fill(totp(memberSecret));
    await p.getByRole('button', { name: 'Turn on two-factor' }).click();
    await p.getByRole('button', { name: 'Done' }).click();
    await p.getByRole('heading', { name: 'Applications' }).waitFor();
    await p.close();

    const o = await page();
    await signInWithCode(o, recovery[3]!);
    await o.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
    await o.getByRole('link', { name: 'Team' }).click();
    const member = o.locator('.member-row').filter({ hasText: 'webmember' });
    await member.getByText('2FA on').waitFor();
    await o.close();
    // No script error and no Content-Security-Policy violation on any page of this file.
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
