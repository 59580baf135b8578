// Debian's Chromium driven by playwright-core, for the dashboard's end-to-end tests. A missing
// /usr/bin/chromium skips those tests with one line, or fails them under REQUIRE_SERVICES=1.
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { requireToolchain } from '../helpers/toolchain.js';
import { ensureWebBuild } from '../../scripts/build-web.mjs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = requireToolchain(`chromium (Debian package, ${CHROMIUM})`, fs.existsSync(CHROMIUM));

export const SHOTS = path.resolve(import.meta.dirname, '../../test-output/screenshots');
/** `npm run docs:screenshots` (UPDATE_DOCS_SCREENSHOTS=1) refreshes these: one per view and size, the window's size exactly. */
export const DOCS_SHOTS = path.resolve(import.meta.dirname, '../../docs/screenshots');

export interface Chromium {
  browser: Browser;
  close(): Promise<void>;
}

/** A fresh headless Chromium (own profile directory, nothing from the network but our server). */
export async function launchChromium(): Promise<Chromium> {
  await ensureWebBuild((m) => console.warn(m));
  // launch() gives Chromium a fresh temporary profile (user-data-dir) of its own and removes it on close.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
    ],
  });
  return {
    browser,
    close: () => browser.close(),
  };
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** A new context (own cookies and sessionStorage) with one page; console errors are collected. */
export async function newPage(b: Chromium, viewport = DESKTOP): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await b.browser.newContext({ viewport, timezoneId: 'Europe/Berlin', locale: 'en-GB' });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return { context, page, errors };
}

export async function signIn(page: Page, base: string, username: string, password: string): Promise<void> {
  await page.goto(`${base}/dashboard/`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

export async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  if (process.env.UPDATE_DOCS_SCREENSHOTS === '1') {
    fs.mkdirSync(DOCS_SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(DOCS_SHOTS, `${name}.png`) });
  }
  return file;
}
