// Live updates in the browser: a change made through a second worker process
// (sharing PostgreSQL and Redis) shows in the Licenses, Users and Logs views within 2 s, with no
// reload; when the WebSocket is cut the page says so, refreshes every 10 s, and reconnects.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { Api } from '../helpers/http.js';
import { ClientApi } from '../helpers/client.js';
import { appFixture, nextIp, type AppFixture } from '../helpers/fixture.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

const hasRedis = hasChromium && (await redisAvailable());

/** Resolves with the milliseconds until `text` shows inside `selector` (fails after `ms`). */
async function shows(page: Page, testId: string, text: string, ms: number): Promise<number> {
  const started = Date.now();
  await page.getByTestId(testId).getByText(text, { exact: false }).first().waitFor({ timeout: ms });
  return Date.now() - started;
}

describe.skipIf(!hasRedis)('web dashboard: live updates', () => {
  let t: TestServer;
  let worker: ServerProcess;
  let b: Chromium;
  let f: AppFixture;
  let viaWorker: Api;

  beforeAll(async () => {
    b = await launchChromium();
    const prefix = `kwweb${Date.now()}:`;
    t = await startTestServer({ REDIS_URL, REDIS_PREFIX: prefix, TRUSTED_PROXIES: '127.0.0.1' });
    // A second worker: its own process, the same database, Redis and secrets (DATA_DIR).
    worker = await spawnServer({
      DATABASE_URL: t.databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: prefix,
      DATA_DIR: t.dataDir,
      TRUSTED_PROXIES: '127.0.0.1',
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password, // LOG_LEVEL stays info: spawnServer waits for server.listening
    });
    f = await appFixture(t);
    viaWorker = await new Api(worker.base).signIn(OWNER.username, OWNER.password);
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await worker?.stop('SIGTERM');
    await t?.close();
  });

  it('shows keys, an activation, a registration and their log lines made through another worker within 2 s', async () => {
    const { page, context } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByText('● Live').waitFor();
    await page.getByTestId('licenses-table').waitFor();

    // Keys generated on the other worker appear in this page's Licenses table.
    const gen = await viaWorker.post(`/apps/${f.app.id}/licenses`, {
      amount: 2,
      duration: 30,
      note: 'made on worker two',
    });
    expect(gen.status).toBe(200);
    expect(await shows(page, 'licenses-table', 'made on worker two', 2_000)).toBeLessThan(2_000);
    const [first, second] = gen.body as { key: string; key_preview: string; id: string }[];

    // A client activates a key on the other worker: the row turns active, no reload.
    const client = new ClientApi(worker.base);
    client.extraHeaders['x-forwarded-for'] = nextIp();
    const init = await client.post('/api/client/init', { api_key: f.app.api_key, version: '1.0' });
    const lic = await client.post('/api/client/license', {
      session: init.body.session,
      license: first!.key,
      hwid: 'live-device-0001',
    });
    expect(lic.status).toBe(200);
    const row = page.getByTestId('licenses-table').locator(`tr[data-row-id="${first!.id}"]`);
    await row.getByText('active').waitFor({ timeout: 2_000 });
    await screenshot(page, 'live-licenses');

    // The Logs view shows the activation; the Users view a registration, both as they happen.
    await page.getByRole('link', { name: 'Logs' }).click();
    await page.getByTestId('logs-table').getByText('client.license').first().waitFor();
    const reg = new ClientApi(worker.base);
    reg.extraHeaders['x-forwarded-for'] = nextIp();
    const s2 = await reg.post('/api/client/init', { api_key: f.app.api_key, version: '1.0' });
    expect(
      (
        await reg.post('/api/client/register', {
          session: s2.body.session,
          username: 'live-player',
          password: 'pw-123456',
          license: second!.key,
          hwid: 'live-device-0002',
        })
      ).status,
    ).toBe(200);
    expect(await shows(page, 'logs-table', 'User live-player registered', 2_000)).toBeLessThan(2_000);
    await page.getByRole('link', { name: 'Users' }).click();
    await page.getByTestId('users-table').getByText('live-player').waitFor({ timeout: 2_000 });
    // A change made while the Users view is open: a freeze on the other worker.
    const user = (await viaWorker.get(`/api/apps/${f.app.id}/users`)).body[0] as { id: string };
    expect((await viaWorker.patch(`/api/users/${user.id}/ban`, { banned: true })).status).toBe(200);
    expect(await shows(page, 'users-table', 'frozen', 2_000)).toBeLessThan(2_000);
    await context.close();
  });

  it('says when the stream is cut, polls every 10 s meanwhile, and reconnects when it can', async () => {
    const { page, context } = await newPage(b);
    let blocked = true;
    let attempts = 0;
    await page.routeWebSocket(/\/api\/ws$/, (ws) => {
      attempts++;
      if (blocked) ws.close();
      else ws.connectToServer();
    });
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    const notice = page.getByText(/Live updates paused: refreshing every 10 s/);
    await notice.waitFor();
    await page.getByTestId('licenses-table').waitFor();
    await screenshot(page, 'live-paused');

    // A change elsewhere arrives by polling, within one 10 s period (plus the request itself).
    const started = Date.now();
    expect(
      (await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 7, note: 'seen by polling' })).status,
    ).toBe(200);
    await page.getByTestId('licenses-table').getByText('seen by polling').waitFor({ timeout: 12_000 });
    expect(Date.now() - started).toBeLessThan(12_000);
    expect(await notice.isVisible()).toBe(true);
    // Reconnects back off: far fewer attempts than seconds waited.
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect(attempts).toBeLessThanOrEqual(6);

    // The stream comes back: the next attempt (at most 30 s away) connects and the notice goes.
    blocked = false;
    await page.getByText('● Live').waitFor({ timeout: 35_000 });
    expect(await notice.count()).toBe(0);
    expect(
      (await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 7, note: 'live again' })).status,
    ).toBe(200);
    await page.getByTestId('licenses-table').getByText('live again').waitFor({ timeout: 2_000 });
    await context.close();
  }, 90_000);
});
