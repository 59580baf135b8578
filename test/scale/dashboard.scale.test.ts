// The Licenses view at 50,000 keys in a real Chromium (npm run test:scale). Behaviour is asserted:
// the DOM holds a bounded number of rows however far the table scrolls, a page is fetched only when
// scrolled to, a live event refetches only the pages in view, and "select all N" covers N keys
// (an action over them is one server job: an extension of all 50,000 is timed, a delete cancelled). Timings are measured
// and REPORTED (test output, test-output/dashboard-scale.md; UPDATE_DOCS_SCALE=1 copies them into
// docs/dashboard-scale.md), never asserted: speed on a loaded CI machine is not a test result.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page, Request } from 'playwright-core';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';
import { hasChromium, launchChromium, newPage, signIn, type Chromium } from '../web/browser.js';

const KEYS = 50_000;
const PAGE = 100; // web/src/views/LicensesTab.tsx PAGE
const ROW = 44; // web/src/components/DataTable.tsx ROW_HEIGHT
const TABLE = '[data-testid="licenses-table"]';
const REPORT = path.resolve(import.meta.dirname, '../../test-output/dashboard-scale.md');
const DOC = path.resolve(import.meta.dirname, '../../docs/dashboard-scale.md');

interface ListCall {
  cursor: string;
  limit: number;
  at: number;
}

const measured: [string, string, string][] = [];
function report(what: string, value: string, target: string): void {
  measured.push([what, value, target]);
  console.log(`[scale] ${what}: ${value} (target ${target})`);
}
const ms = (n: number) => `${Math.round(n)} ms`;

async function keyCount(f: AppFixture): Promise<number> {
  const rows = await f.sql<{ n: string }>('select count(*) as n from license_keys where app_id = $1', [f.app.id]);
  return Number(rows[0]?.n);
}

/** Row counts of the table: rows in the DOM, and what it reports to assistive technology. */
async function tableState(page: Page): Promise<{ domRows: number; rowCount: number }> {
  return page.evaluate((sel) => {
    const table = document.querySelector(`${sel} table`)!;
    return {
      domRows: table.querySelectorAll('tbody tr:not(.spacer)').length,
      rowCount: Number(table.getAttribute('aria-rowcount')) - 1,
    };
  }, TABLE);
}

/** Scrolls the table to its end until it knows `rows` rows (a page is fetched each time the end comes into view). */
async function scrollUntil(page: Page, rows: number): Promise<number> {
  let maxDom = 0;
  for (;;) {
    const s = await tableState(page);
    maxDom = Math.max(maxDom, s.domRows);
    if (s.rowCount >= rows) return maxDom;
    await page.evaluate((sel) => {
      const box = document.querySelector<HTMLElement>(sel)!;
      box.scrollTop = box.scrollHeight;
    }, TABLE);
    await page.waitForFunction(
      ([sel, n]) => Number(document.querySelector(`${sel} table`)!.getAttribute('aria-rowcount')) - 1 > n,
      [TABLE, s.rowCount] as const,
      { timeout: 30_000 },
    );
  }
}

describe.skipIf(!hasChromium)(`dashboard at ${KEYS.toLocaleString('en-US')} keys`, () => {
  let t: TestServer;
  let b: Chromium;
  let f: AppFixture;
  let known: { id: string; key: string };

  beforeAll(async () => {
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    f = await appFixture(t);
    // One key through the API as the template; the rest are copies of its row made by PostgreSQL
    // itself (each with its own id, hash, preview and creation time one second apart), so the
    // seeding follows whatever columns license_keys has.
    const started = Date.now();
    await f.keys(1, { note: 'scale 0' });
    const [template] = await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id]);
    await f.sql(
      `insert into license_keys
       select (jsonb_populate_record(null::license_keys, to_jsonb(k) || jsonb_build_object(
         'id', gen_random_uuid(), 'key_hash', md5('scale-a' || g) || md5('scale-b' || g),
         'key_preview', 'SCAL…' || lpad(g::text, 5, '0'), 'note', 'scale ' || g,
         'created_at', k.created_at - make_interval(secs => g)))).*
       from license_keys k, generate_series(1, $2::int) g where k.id = $1`,
      [template!.id, KEYS - 2],
    );
    // A key whose plaintext we know, placed among the seeded ones at row 1,051 (page 11), for the
    // live-update check: its activation is a real client call.
    const gen = await f.owner.post(`/apps/${f.app.id}/licenses`, {
      amount: 1,
      duration: 30,
      unit: 'days',
      note: 'activated live',
    });
    known = { id: gen.body[0].id, key: gen.body[0].key };
    await f.sql(
      `update license_keys set created_at = (select created_at from license_keys where id = $2) - interval '1050.5 seconds' where id = $1`,
      [known.id, template!.id],
    );
    expect(await keyCount(f)).toBe(KEYS);
    report('seeding 50,000 keys (1 by the API, the rest by SQL)', ms(Date.now() - started), 'none');
  }, 300_000);

  afterAll(async () => {
    await b?.close();
    await t?.close();
    const table = [
      '| Measurement | Result | Target |',
      '|---|---|---|',
      ...measured.map((m) => `| ${m.join(' | ')} |`),
    ].join('\n');
    const stamp = `Measured on ${new Date().toISOString().slice(0, 10)}, Chromium ${b?.browser.version() ?? '?'}, ${KEYS.toLocaleString('en-US')} keys.`;
    fs.mkdirSync(path.dirname(REPORT), { recursive: true });
    fs.writeFileSync(REPORT, `${stamp}\n\n${table}\n`);
    if (process.env.UPDATE_DOCS_SCALE === '1' && fs.existsSync(DOC)) {
      const doc = fs.readFileSync(DOC, 'utf8');
      fs.writeFileSync(
        DOC,
        doc.replace(
          /<!-- measurements -->[\s\S]*<!-- \/measurements -->/,
          `<!-- measurements -->\n${stamp}\n\n${table}\n<!-- /measurements -->`,
        ),
      );
    }
  });

  async function licensesPage(): Promise<{
    page: Page;
    calls: ListCall[];
    close: () => Promise<void>;
    firstRowsMs: number;
  }> {
    const { page, context } = await newPage(b);
    await signIn(page, t.base, OWNER.username, OWNER.password);
    const calls: ListCall[] = [];
    page.on('request', (r: Request) => {
      const u = new URL(r.url());
      if (r.method() === 'GET' && u.pathname === `/api/apps/${f.app.id}/licenses`) {
        calls.push({
          cursor: u.searchParams.get('cursor') ?? '',
          limit: Number(u.searchParams.get('limit')),
          at: Date.now(),
        });
      }
    });
    await page.goto(`${t.base}/dashboard/apps/${f.app.id}/licenses`);
    // Milliseconds from the start of the navigation to the first key row in the DOM.
    const firstRowsMs = (await (
      await page.waitForFunction(
        (sel) => (document.querySelector(`${sel} tr[data-row-id]`) ? performance.now() : null),
        TABLE,
        { timeout: 60_000, polling: 'raf' },
      )
    ).jsonValue()) as number;
    return { page, calls, close: () => context.close(), firstRowsMs };
  }

  it('shows the first rows at once, keeps the DOM bounded while scrolling, and fetches a page only when scrolled to', async () => {
    const { page, calls, close, firstRowsMs } = await licensesPage();
    report('first rows after navigating to Licenses', ms(firstRowsMs), '≤ 1,500 ms');
    await page.getByText('● Live').waitFor();
    await page.getByTestId('licenses-count').getByText('50,000 keys').waitFor();
    expect(calls.filter((c) => c.limit === PAGE).map((c) => c.cursor)).toEqual(['']); // page 1 only

    // The first 2,000 keys, page by page as the end of the table comes into view.
    const t0 = Date.now();
    const maxDom = await scrollUntil(page, 2_000);
    report('scrolling to row 2,000 (20 pages fetched as they came into view)', ms(Date.now() - t0), 'none');
    const pages = calls.filter((c) => c.limit === PAGE);
    expect(new Set(pages.map((c) => c.cursor)).size).toBe(pages.length); // each page once
    expect(pages.length).toBe(2_000 / PAGE); // the 20 pages scrolled to, none beyond
    expect(maxDom).toBeLessThan(60);

    // A checkbox with 2,000 rows loaded: from the click to the next frame painted after the change.
    const tick = await page.evaluate(async (sel) => {
      const cb = document.querySelector<HTMLInputElement>(`${sel} tbody tr[data-row-id] input[type="checkbox"]`)!;
      const row = cb.closest('tr')!;
      let dom = 0;
      const changed = new Promise<void>((resolve) => {
        const mo = new MutationObserver(() => {
          if (!row.classList.contains('selected')) return;
          dom = performance.now() - t;
          mo.disconnect();
          resolve();
        });
        mo.observe(row, { attributes: true, attributeFilter: ['class'] });
      });
      const t = performance.now();
      cb.click();
      await changed;
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
      return { dom, frame: performance.now() - t };
    }, TABLE);
    report(
      'ticking one checkbox (2,000 rows loaded): to the DOM / to the next frame',
      `${ms(tick.dom)} / ${ms(tick.frame)}`,
      '≤ 100 ms',
    );
    await page.getByTestId('selected-count').getByText('1 selected').waitFor();

    // Scrolling: 240 frames, 88 px (two rows) a frame, through rows already loaded and new pages.
    await page.evaluate((sel) => {
      document.querySelector<HTMLElement>(sel)!.scrollTop = 0;
    }, TABLE);
    const scroll = await page.evaluate(
      async ([sel, step]) => {
        const box = document.querySelector<HTMLElement>(sel)!;
        const frames: number[] = [];
        let maxRows = 0;
        let last = await new Promise<number>((r) => requestAnimationFrame(r));
        for (let i = 0; i < 240; i++) {
          box.scrollTop += step;
          const now = await new Promise<number>((r) => requestAnimationFrame(r));
          frames.push(now - last);
          last = now;
          maxRows = Math.max(maxRows, box.querySelectorAll('tbody tr:not(.spacer)').length);
        }
        frames.sort((a, b) => a - b);
        return {
          p95: frames[Math.floor(frames.length * 0.95)]!,
          median: frames[Math.floor(frames.length / 2)]!,
          maxRows,
          top: box.scrollTop,
        };
      },
      [TABLE, 2 * ROW] as const,
    );
    report(
      'scrolling, frame time median / p95 (240 frames of 88 px)',
      `${scroll.median.toFixed(1)} / ${scroll.p95.toFixed(1)} ms`,
      'p95 ≤ 32 ms',
    );
    expect(scroll.top).toBeGreaterThan(200 * ROW); // it did scroll
    expect(scroll.maxRows).toBeLessThan(60);

    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    await cdp.send('HeapProfiler.collectGarbage');
    const { metrics } = await cdp.send('Performance.getMetrics');
    const metric = (name: string) => metrics.find((m) => m.name === name)?.value ?? 0;
    report(
      'DOM nodes / JS heap with 2,000 rows loaded',
      `${metric('Nodes').toLocaleString('en-US')} / ${(metric('JSHeapUsedSize') / 1048576).toFixed(1)} MB`,
      'was 54,116 / 300 MB',
    );
    await close();
  });

  it('refetches only the pages in view when a client activates a key', async () => {
    const { page, calls, close } = await licensesPage();
    await page.getByText('● Live').waitFor();
    await scrollUntil(page, 2_000);
    // Row 1,051 (page 11) in the middle of the box.
    await page.evaluate(
      ([sel, top]) => {
        document.querySelector<HTMLElement>(sel)!.scrollTop = top;
      },
      [TABLE, 1_051 * ROW - 200] as const,
    );
    const row = page.locator(`${TABLE} tr[data-row-id="${known.id}"]`);
    await row.waitFor();
    const starts = [...new Set(calls.filter((c) => c.limit === PAGE).map((c) => c.cursor))]; // page i starts at starts[i]
    const inView = await page.evaluate(
      (sel) =>
        [...document.querySelectorAll(`${sel} tbody tr[aria-rowindex]`)].map(
          (r) => Number(r.getAttribute('aria-rowindex')) - 2,
        ),
      TABLE,
    );
    const viewPages = [...new Set(inView.map((i) => Math.floor(i / PAGE)))];
    expect(viewPages).toContain(10);

    const client = f.client();
    const session = await f.session(client);
    const before = calls.length;
    const started = Date.now();
    expect(
      (await client.post('/api/client/license', { session, license: known.key, hwid: 'scale-device-1' })).status,
    ).toBe(200);
    await row.getByText('active').waitFor({ timeout: 10_000 });
    report(
      'a client activation shown in the open table (live event, pages in view refetched)',
      ms(Date.now() - started),
      'none',
    );
    const after = calls.slice(before).filter((c) => c.limit === PAGE);
    expect(after.length).toBeGreaterThanOrEqual(1);
    expect(new Set(after.map((c) => c.cursor)).size).toBeLessThanOrEqual(viewPages.length);
    for (const c of after) expect(viewPages.map((p) => starts[p])).toContain(c.cursor);
    expect(after.map((c) => c.cursor)).not.toContain(''); // page 1 is out of view: not refetched
    await close();
  });

  it('selects all 50,000 matching keys; one server job extends them all, another deletes them until cancelled', async () => {
    // Every key activated, so an extension applies to each (docs/api.md "Bulk jobs").
    await f.sql(
      `update license_keys set status = 'used', used_by = 'license-only', expires_at = now() + interval '30 days'
       where app_id = $1 and status = 'unused'`,
      [f.app.id],
    );
    const { page, calls, close } = await licensesPage();
    await page.getByText('● Live').waitFor();
    const selectAll = async () => {
      await page.getByLabel('Select all loaded keys').check();
      await page.getByTestId('selected-count').getByText('100 selected').waitFor();
      const started = Date.now();
      await page.getByRole('button', { name: 'Select all 50,000 matching keys' }).click();
      await page
        .getByTestId('selected-count')
        .getByText('All 50,000 matching keys selected')
        .waitFor({ timeout: 120_000 });
      return Date.now() - started;
    };
    report('collecting the ids of all 50,000 matching keys (50 requests of 1,000)', ms(await selectAll()), 'none');
    const walk = calls.filter((c) => c.limit === 1000);
    expect(walk).toHaveLength(KEYS / 1000 + 1); // 50 full pages, then the empty one that ends the listing
    expect(new Set(walk.map((c) => c.cursor)).size).toBe(walk.length);

    const perKey: string[] = [];
    page.on('request', (r) => {
      if (/\/api\/licenses\/[0-9a-f-]{36}/.test(new URL(r.url()).pathname)) perKey.push(r.url());
    });
    const before = await f.sql<{ at: Date }>('select max(expires_at) as at from license_keys where app_id = $1', [
      f.app.id,
    ]);
    await page.getByRole('button', { name: 'Extend selected' }).click();
    const extend = page.getByRole('dialog', { name: 'Extend 50,000 keys' });
    await extend.getByLabel('Amount of time').fill('1');
    await extend.getByLabel('Unit').selectOption('days');
    const started = Date.now();
    await extend.getByRole('button', { name: 'Extend' }).click();
    await page
      .getByTestId('bulk-progress')
      .getByText(/ of 50,000/)
      .waitFor();
    const extended = page.getByTestId('bulk-report');
    await extended.getByText('50,000 succeeded, 0 skipped.').waitFor({ timeout: 600_000 });
    report(
      'extending all 50,000 keys by a day (one server job, from the click to the report)',
      ms(Date.now() - started),
      '30 s',
    );
    expect(perKey).toEqual([]); // one job, no request per key
    const after = await f.sql<{ at: Date }>('select max(expires_at) as at from license_keys where app_id = $1', [
      f.app.id,
    ]);
    expect(new Date(after[0]!.at).getTime() - new Date(before[0]!.at).getTime()).toBe(86_400_000);
    await extended.getByRole('button', { name: 'Dismiss' }).click();

    await selectAll();
    await page.getByRole('button', { name: 'Delete selected' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete 50,000 keys?' });
    await dialog.getByRole('button', { name: 'Delete 50,000 keys' }).click();
    const progress = page.getByTestId('bulk-progress');
    await page.waitForFunction(() =>
      /: ([1-9]\d\d|\d,\d{3}) of 50,000/.test(
        document.querySelector('[data-testid="bulk-progress"]')?.textContent ?? '',
      ),
    );
    await progress.getByRole('button', { name: 'Cancel' }).click();
    const result = page.getByTestId('bulk-report');
    await result.getByText(/not reached \(cancelled\)/).waitFor({ timeout: 120_000 });
    const text = (await result.textContent()) ?? '';
    const m = /([\d,]+) succeeded, 0 skipped, ([\d,]+) not reached \(cancelled\)/.exec(text);
    expect(m, text).not.toBeNull();
    const ok = Number(m![1]!.replace(/,/g, ''));
    const unreached = Number(m![2]!.replace(/,/g, ''));
    expect(ok + unreached).toBe(KEYS);
    expect(perKey).toEqual([]);
    expect(await keyCount(f)).toBe(KEYS - ok);
    await close();
  }, 900_000);
});
