// Daily work in a real Chromium against a real server (docs/protocol.md 15): the Logs tab's text and date
// filters, Export CSV on Licenses, Users and Logs downloading the server's streamed CSV with the
// current filters, a blacklist entry with a CIDR range and a reason, and each user's key on the Users tab.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { parseCsv } from '../helpers/csv.js';
import { hwid } from '../helpers/client.js';
import { hasChromium, launchChromium, newPage, signIn, type Chromium } from './browser.js';

describe.skipIf(!hasChromium)('web dashboard: daily work', () => {
  let t: TestServer;
  let b: Chromium;
  let f: AppFixture;

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t);
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
  });

  async function ownerPage(): Promise<Page> {
    const { page } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    return page;
  }

  async function downloaded(p: Page, name: string): Promise<string[][]> {
    const download = p.waitForEvent('download');
    await p.getByRole('link', { name }).click();
    return parseCsv(fs.readFileSync(await (await download).path(), 'utf8'));
  }

  it('exports the keys of the current search as CSV', async () => {
    await f.keys(2, { note: 'export me' });
    await f.keys(1, { note: 'other' });
    const p = await ownerPage();
    await p.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    await p.getByRole('searchbox', { name: 'Search' }).fill('export me');
    await p.waitForFunction(() => document.querySelector('a[href*="export.csv?q=export+me"]') !== null);
    const rows = await downloaded(p, 'Export CSV');
    const note = rows[0]!.indexOf('note');
    expect(rows.slice(1).map((r) => r[note])).toEqual(['export me', 'export me']);
  });

  it("shows each user's key and exports the users", async () => {
    const [key] = await f.keys(1, { note: 'user key' });
    const c = f.client();
    const session = await f.session(c);
    await c.post('/api/client/register', {
      session,
      username: 'keyholder',
      password: 'pw-user-1',
      license: key,
      hwid: hwid('keyholder'),
    });
    const p = await ownerPage();
    await p.goto(`${t.base}/dashboard/apps/${f.app.id}/users`);
    const preview = `${key!.slice(0, 4)}****${key!.slice(-4)}`;
    await p.getByTestId('users-table').getByText(preview).waitFor();
    const rows = await downloaded(p, 'Export CSV');
    expect(rows[1]![rows[0]!.indexOf('key_preview')]).toBe(preview);
  });

  it('searches users on the server, past the 2,000 newest', async () => {
    const g = await appFixture(t);
    await g.sql(
      `insert into end_users (id, app_id, username, password_hash, created_at)
       select gen_random_uuid(), $1, 'deep' || lpad(i::text, 5, '0'), 'x', timestamptz '2026-01-01' - make_interval(secs => i)
       from generate_series(1, 2300) i`,
      [g.app.id],
    );
    const p = await ownerPage();
    await p.goto(`${t.base}/dashboard/apps/${g.app.id}/users`);
    await p.getByTestId('users-table').getByText('deep00001').waitFor();
    await p.getByRole('searchbox', { name: 'Filter' }).fill('deep02250');
    await p.getByTestId('users-table').getByText('deep02250').waitFor();
    await p.getByTestId('users-count').filter({ hasText: '1 user match' }).waitFor();
  });

  it('filters the log by text and dates, and exports what it shows', async () => {
    await f.sql(
      `insert into audit_log (app_id, at, level, action, detail) values
         ($1, '2025-06-01T10:00:00Z', 'info', 'client.init', 'needle in June'),
         ($1, '2025-07-01T10:00:00Z', 'info', 'client.init', 'needle in July')`,
      [f.app.id],
    );
    const p = await ownerPage();
    await p.goto(`${t.base}/dashboard/apps/${f.app.id}/logs`);
    await p.getByLabel('Text').fill('needle');
    await p.getByLabel('From').fill('2025-06-15');
    await p.getByRole('button', { name: 'Filter' }).click();
    const table = p.getByTestId('logs-table');
    await table.getByText('needle in July').waitFor();
    expect(await table.getByText('needle in June').count()).toBe(0);
    const rows = await downloaded(p, 'Export CSV');
    expect(rows.slice(1).map((r) => r[rows[0]!.indexOf('detail')])).toEqual(['needle in July']);
  });

  it('blocks a CIDR range with a reason from the Security tab', async () => {
    const p = await ownerPage();
    await p.goto(`${t.base}/dashboard/apps/${f.app.id}/security`);
    await p.getByLabel('Value').fill('10.1.2.3/8');
    await p.getByLabel('Reason').fill('datacenter range');
    await p.getByRole('button', { name: 'Block' }).click();
    const list = p.getByRole('region', { name: 'Blacklist' });
    await list.getByText('10.0.0.0/8').waitFor();
    await list.getByText('datacenter range').waitFor();
    await p.getByLabel('Value').fill('10.0.0.0/40');
    await p.getByRole('button', { name: 'Block' }).click();
    await p
      .getByText(/CIDR range/)
      .first()
      .waitFor();
    const init = await f.client('10.200.0.1').post('/api/client/init', { api_key: f.app.api_key, version: '1.0' });
    expect(init.status).toBe(403);
  });
});
