// The dashboard's Releases tab in a real Chromium against a real server: a draft created with an
// entitlement picked from the catalogue, a multi-MB artifact uploaded as the raw file with a progress
// bar (the server's hashes checked against the file's), publish and yank each after a confirmation,
// and the application's expired_updates rule set in Settings.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture } from '../helpers/fixture.js';
import { hasChromium, launchChromium, newPage, signIn, type Chromium } from './browser.js';

describe.skipIf(!hasChromium)('dashboard Releases tab', () => {
  let t: TestServer;
  let b: Chromium;
  let dir: string;
  beforeAll(async () => {
    b = await launchChromium();
    dir = await mkdtemp(path.join(tmpdir(), 'kw-web-releases-'));
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', ARTIFACT_DIR: path.join(dir, 'store') });
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('creates a draft, uploads with progress, publishes and yanks after confirming', async () => {
    const f = await appFixture(t);
    await f.owner.call('PUT', `/api/apps/${f.app.id}/entitlements`, { entitlements: [{ code: 'pro', name: 'Pro' }] });
    const data = randomBytes(4 * 1024 * 1024 + 17);
    const file = path.join(dir, 'app-3.0.0.tar.gz');
    await writeFile(file, data);
    const { page, errors } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/releases`);
    await page.getByRole('heading', { name: 'New release' }).waitFor();
    await page.getByLabel('Version').fill('3.0.0');
    await page.getByLabel('Channel').selectOption('beta');
    await page.getByLabel('Notes').fill('Big one');
    await page.getByRole('checkbox', { name: /pro/ }).check();
    await page.getByRole('button', { name: 'Create draft' }).click();
    const card = page.getByTestId('release-3.0.0');
    await card.getByText('draft', { exact: true }).waitFor();

    // Upload: the progress bar shows while the raw file goes up; then the artifact is listed.
    // A fast loopback upload may show its bar for a moment only: the page notes every <progress> added.
    await page.evaluate(() => {
      const w = window as unknown as { progressSeen: number };
      w.progressSeen = 0;
      new MutationObserver((records) => {
        for (const r of records)
          for (const n of r.addedNodes)
            if (n instanceof HTMLElement && (n.tagName === 'PROGRESS' || n.querySelector('progress'))) w.progressSeen++;
      }).observe(document.body, { childList: true, subtree: true });
    });
    await card.getByLabel('Artifact file').setInputFiles(file);
    await card.getByLabel('Platform').fill('linux');
    await card.getByLabel('Arch').fill('x64');
    await card.getByRole('button', { name: 'Upload' }).click();
    await card.getByRole('link', { name: 'app-3.0.0.tar.gz' }).waitFor({ timeout: 60_000 });
    expect(await page.evaluate(() => (window as unknown as { progressSeen: number }).progressSeen)).toBeGreaterThan(0);
    const [rel] = (await f.owner.get(`/api/apps/${f.app.id}/releases`)).body;
    expect(rel).toMatchObject({ version: '3.0.0', channel: 'beta', notes: 'Big one', entitlements: ['pro'] });
    expect(rel.artifacts[0]).toMatchObject({
      platform: 'linux',
      arch: 'x64',
      size: data.length,
      sha256: createHash('sha256').update(data).digest('hex'),
    });

    // Publish asks first; Cancel leaves it a draft.
    await card.getByRole('button', { name: 'Publish' }).click();
    await page.getByRole('dialog').getByText('Publish 3.0.0?').waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await f.owner.get(`/api/releases/${rel.id}`)).body.status).toBe('draft');
    await card.getByRole('button', { name: 'Publish' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Publish' }).click();
    await card.getByText('published', { exact: true }).waitFor();
    expect((await f.owner.get(`/api/releases/${rel.id}`)).body.status).toBe('published');

    await card.getByRole('button', { name: 'Yank' }).click();
    await page.getByRole('dialog').getByText('Yank 3.0.0?').waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Yank' }).click();
    await card.getByText('yanked', { exact: true }).waitFor();
    expect((await f.owner.get(`/api/releases/${rel.id}`)).body.status).toBe('yanked');
    // The expiry rule is an application setting.
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/settings`);
    await page.getByLabel('Updates after a key expires').selectOption('maintain');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved').waitFor();
    expect((await f.owner.get(`/api/apps/${f.app.id}`)).body.expired_updates).toBe('maintain');
    expect(errors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    await page.context().close();
  }, 180_000);
});
