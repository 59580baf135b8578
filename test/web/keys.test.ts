// Key work on the Licenses tab in a real Chromium against a real server (docs/protocol.md 15.2, 15.6): the
// key drawer, reached from the row menu as "Edit / details", edits level, note and concurrent
// sessions (a refused value shown at its field, nothing saved); the "Created by" column names the
// member who made each key, a row shows its devices under the HWID ("2 / 3 devices"; none for a
// reseller without view_hwid) and its entitlement codes as chips ("+N" past three), and the table
// still fits 1280 px; the import dialog reads pasted lines
// and a picked KeyAuth JSON file, previews the dry run (imported, skipped and why, or the refused
// row) and imports only on "Import N keys".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { Api } from '../helpers/http.js';
import { hwid } from '../helpers/client.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

const preview = (key: string) => `${key.slice(0, 4)}****${key.slice(-4)}`;

/** The error shown inside the field labelled `label`. */
function errorOf(scope: Locator, label: string): Locator {
  return scope
    .locator('.field')
    .filter({ has: scope.page().getByLabel(label, { exact: true }) })
    .locator('.field-error');
}

describe.skipIf(!hasChromium)('web dashboard: editing, creators and importing keys', () => {
  let t: TestServer;
  let b: Chromium;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  async function ownerPage(): Promise<Page> {
    const { page, errors } = await newPage(b);
    page.on('close', () => pageErrors.push(...errors.filter((e) => !/^Failed to load resource/.test(e))));
    await signIn(page, t.base, OWNER.username, OWNER.password);
    return page;
  }

  async function keyRow(f: AppFixture, key: string) {
    const r = await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(key)}`);
    expect(r.status).toBe(200);
    return r.body.items[0];
  }

  it('edits level, note and concurrent sessions from the row menu, showing a refused value at its field', async () => {
    const f = await appFixture(t, { max_sessions: 3 });
    const [key] = await f.keys(1, { note: 'before edit' });
    const page = await ownerPage();
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByRole('button', { name: `Actions for ${preview(key!)}` }).click();
    await page
      .getByRole('menu', { name: `Actions for ${preview(key!)}` })
      .getByRole('menuitem', { name: 'Edit / details' })
      .click();
    const drawer = page.getByRole('dialog', { name: `Key ${preview(key!)}` });
    expect(await drawer.getByLabel('Level').inputValue()).toBe('1');
    expect(await drawer.getByLabel('Note').inputValue()).toBe('before edit');
    // Blank: the application's; its value is the placeholder and the hint says so.
    expect(await drawer.getByLabel('Concurrent sessions').inputValue()).toBe('');
    await drawer.getByText("0 = unlimited. Blank: the application's (3).", { exact: false }).waitFor();

    await drawer.getByLabel('Level').fill('7');
    await drawer.getByLabel('Note').fill('edited in the drawer');
    await drawer.getByLabel('Concurrent sessions').fill('5000');
    await drawer.getByRole('button', { name: 'Save key' }).click();
    await errorOf(drawer, 'Concurrent sessions').filter({ hasText: 'from 0 (unlimited) to 1,000' }).waitFor();
    expect(await drawer.getByLabel('Concurrent sessions').getAttribute('aria-invalid')).toBe('true');
    // One refused field refuses the whole change.
    expect(await keyRow(f, key!)).toMatchObject({ level: 1, note: 'before edit', max_sessions: null });

    await drawer.getByLabel('Concurrent sessions').fill('0');
    await drawer.getByRole('button', { name: 'Save key' }).click();
    await page.getByText(`${preview(key!)}: saved`).waitFor();
    expect(await errorOf(drawer, 'Concurrent sessions').count()).toBe(0);
    expect(await keyRow(f, key!)).toMatchObject({ level: 7, note: 'edited in the drawer', max_sessions: 0 });
    await drawer.getByText('level 7').waitFor();
    await screenshot(page, 'key-drawer-edit');

    // Blank again: back to the application's limit; the rest is not sent.
    await drawer.getByLabel('Concurrent sessions').fill('');
    await drawer.getByRole('button', { name: 'Save key' }).click();
    await expect.poll(async () => (await keyRow(f, key!)).max_sessions).toBe(null);
    expect(await keyRow(f, key!)).toMatchObject({ level: 7, note: 'edited in the drawer' });
    await page.keyboard.press('Escape');
    await page.getByTestId('licenses-table').getByText('edited in the drawer').waitFor();
    await page.close();
  });

  it('shows who created each key, its devices and entitlements, and still fits a 1280-wide window', async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 3 });
    const codes = ['pro', 'export', 'beta.1', 'cloud', 'api'];
    const catalogue = await f.owner.put(`/api/apps/${f.app.id}/entitlements`, {
      entitlements: codes.map((code) => ({ code, name: code })),
    });
    expect(catalogue.status, JSON.stringify(catalogue.body)).toBe(200);
    const admin = await f.owner.post('/api/team', {
      username: 'maker-admin',
      display_name: 'Ada Maker',
      password: 'maker-pass-1',
      role: 'admin',
      allowed_apps: [f.app.id],
    });
    expect(admin.status, JSON.stringify(admin.body)).toBe(200);
    const adminApi = await new Api(t.base).signIn('maker-admin', 'maker-pass-1');
    const made = await adminApi.post(`/api/apps/${f.app.id}/licenses`, {
      amount: 1,
      duration: 30,
      unit: 'days',
      note: 'by the admin',
    });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const [ownerKey] = await f.keys(1, { note: 'by the owner', entitlements: ['pro', 'export'] });
    await f.keys(1, { note: 'all five', entitlements: codes });
    // The owner's key activated on two machines (license-only): two devices of the application's 3.
    for (const device of [hwid('rowdev1'), hwid('rowdev2')]) {
      const c = f.client();
      const r = await c.post('/api/client/license', { session: await f.session(c), license: ownerKey, hwid: device });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    const page = await ownerPage();
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    const table = page.getByTestId('licenses-table');
    await table.getByRole('columnheader', { name: 'Created / by' }).waitFor();
    const created = (note: string) => table.locator('tr').filter({ hasText: note }).locator('td[data-col="created"]');
    await created('by the admin').getByTestId('created-by').filter({ hasText: 'Ada Maker' }).waitFor();
    await created('by the owner').getByTestId('created-by').filter({ hasText: OWNER.username }).waitFor();
    expect(await created('by the admin').getAttribute('title')).toBe('Created by: maker-admin');
    expect(await created('by the owner').getAttribute('title')).toBe('Created by: You');
    // Devices under the HWID, entitlement codes as chips under the note (the first three, then "+N").
    const row = (note: string) => table.locator('tr').filter({ hasText: note });
    expect(await row('by the owner').getByTestId('devices').textContent()).toBe('2 / 3 devices');
    expect(await row('by the owner').getByTestId('entitlements').locator('.chip').allTextContents()).toEqual([
      'export',
      'pro',
    ]);
    expect(await row('by the admin').getByTestId('devices').textContent()).toBe('0 / 3 devices');
    expect(await row('by the admin').getByTestId('entitlements').count()).toBe(0);
    expect(await row('all five').getByTestId('entitlements').locator('.chip').allTextContents()).toEqual([
      'api',
      'beta.1',
      'cloud',
      '+2',
    ]);
    expect(await row('all five').locator('td[data-col="note"]').getAttribute('title')).toBe(
      'all five\nEntitlements: api, beta.1, cloud, export, pro',
    );
    // Both lines are whole: neither the time nor the name is cut.
    for (const cell of await table.locator('td[data-col="created"] .created-cell > *').all())
      expect(await cell.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
    const fit = await table.evaluate((box) => ({
      table: box.querySelector('table')!.scrollWidth,
      box: box.clientWidth,
    }));
    expect(fit.table).toBeLessThanOrEqual(fit.box);
    await screenshot(page, 'licenses-created-by');
    await page.close();
  });

  it('imports pasted keys after a dry-run preview, and names the row a KeyAuth file is refused for', async () => {
    const f = await appFixture(t);
    const [existing] = await f.keys(1, { note: 'already here' });
    const page = await ownerPage();
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByTestId('licenses-count').filter({ hasText: '1 key' }).waitFor();
    await page.getByRole('button', { name: 'Import keys' }).click();
    const dialog = page.getByRole('dialog', { name: 'Import keys' });
    await dialog
      .getByLabel('Keys to import')
      .fill(`IMPORTED-KEY-0001\n${existing}\n\nIMPORTED-KEY-0002\nIMPORTED-KEY-0001\n`);
    await dialog.getByRole('button', { name: 'Preview' }).click();
    const shown = dialog.getByTestId('import-preview');
    await shown.getByText('2 keys will be imported').waitFor();
    await shown.getByText('2 skipped', { exact: false }).waitFor();
    const skipped = dialog.getByRole('list', { name: 'Skipped keys' });
    await skipped.getByText(`${preview(existing!)}: already in the application`).waitFor();
    await skipped.getByText('repeated in the import', { exact: false }).waitFor();
    // The preview wrote nothing.
    expect((await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items).toHaveLength(1);
    await screenshot(page, 'licenses-import-preview');

    await dialog.getByRole('button', { name: 'Import 2 keys' }).click();
    await page.getByText('Imported 2 keys, 2 skipped').waitFor();
    await page.getByTestId('licenses-count').filter({ hasText: '3 keys' }).waitFor();
    expect(await keyRow(f, 'IMPORTED-KEY-0002')).toMatchObject({ status: 'unused', created_by: expect.any(String) });

    // A KeyAuth export picked as a file: its second row (index 1) has a status KeyAuth does not have.
    await page.getByRole('button', { name: 'Import keys' }).click();
    const rows = [
      { key: 'KEYAUTH-ROW-0000', expires: 86400 * 7, status: 'Not Used', level: 2, note: 'from keyauth', usedby: '' },
      { key: 'KEYAUTH-ROW-0001', expires: 86400, status: 'Lost', level: 1, note: '', usedby: '' },
    ];
    const pick = (data: unknown) =>
      dialog.getByLabel('Or choose a file').setInputFiles({
        name: 'licenses.json',
        mimeType: 'application/json',
        buffer: Buffer.from(JSON.stringify(data)),
      });
    await pick(rows);
    await expect.poll(() => dialog.getByLabel('Keys to import').inputValue()).toContain('KEYAUTH-ROW-0001');
    await dialog.getByRole('button', { name: 'Preview' }).click();
    const refused = dialog.getByTestId('import-refused');
    await refused.filter({ hasText: 'row 1' }).waitFor();
    await refused.filter({ hasText: 'status must be' }).waitFor();
    expect(await dialog.getByRole('button', { name: /^Import \d/ }).count()).toBe(0);

    await pick([rows[0]]);
    await dialog.getByRole('button', { name: 'Preview' }).click();
    await dialog.getByTestId('import-preview').getByText('KeyAuth license rows').waitFor();
    await dialog.getByRole('button', { name: 'Import 1 key' }).click();
    await page.getByText('Imported 1 key').waitFor();
    expect(await keyRow(f, 'KEYAUTH-ROW-0000')).toMatchObject({
      level: 2,
      note: 'from keyauth',
      duration_value: 7,
      duration_unit: 'days',
    });
    await page.getByTestId('licenses-table').getByText('from keyauth').waitFor();
    await page.close();
  });

  it('offers no import to a reseller, and shows one without view_hwid no HWID and no devices', async () => {
    const f = await appFixture(t, { hwid_lock: true, max_devices: 3 });
    const r = await f.owner.post('/api/team', {
      username: 'no-import-reseller',
      password: 'reseller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { view_keys: true, generate_keys: true },
    });
    expect(r.status).toBe(200);
    const seller = await new Api(t.base).signIn('no-import-reseller', 'reseller-pass-1');
    const made = await seller.post(`/api/apps/${f.app.id}/licenses`, {
      amount: 1,
      duration: 30,
      unit: 'days',
      note: 'sold on a device',
    });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const c = f.client();
    const used = await c.post('/api/client/license', {
      session: await f.session(c),
      license: made.body[0].key,
      hwid: hwid('sold1'),
    });
    expect(used.status, JSON.stringify(used.body)).toBe(200);
    const { page } = await newPage(b);
    await signIn(page, t.base, 'no-import-reseller', 'reseller-pass-1');
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await page.getByRole('button', { name: 'Generate keys' }).waitFor();
    expect(await page.getByRole('button', { name: 'Import keys' }).count()).toBe(0);
    const table = page.getByTestId('licenses-table');
    await table.getByText('sold on a device').waitFor();
    expect(await table.getByRole('columnheader', { name: 'HWID', exact: true }).count()).toBe(0);
    expect(await table.getByTestId('devices').count()).toBe(0);
    await page.close();
  });

  it('raised no script error and no CSP violation on any page above', () => {
    // Refused requests (the 422s above) are logged by Chromium as "Failed to load resource": expected.
    expect(pageErrors).toEqual([]);
  });
});
