// The batch history (docs/spec.md "Limits": 5 in the browser session), bulk runs (one request per row with
// succeeded and failed counts), 422 details mapped to their fields, and the activation time.
import { describe, expect, it } from 'vitest';
import { readBatches, rememberBatch, type Batch } from './history.js';
import { runBulk } from './bulk.js';
import { apiError } from '../api/errors.js';
import { activatedAt } from './time.js';
import { keysCsv } from './download.js';

function memoryStorage() {
  const m = new Map<string, string>();
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v) };
}
const batch = (n: number): Batch => ({
  id: `b${n}`,
  at: new Date(2026, 0, n).toISOString(),
  app_id: 'a',
  app_name: 'A',
  keys: [],
});

describe('batch history', () => {
  it('keeps the newest five, newest first', () => {
    const s = memoryStorage();
    for (let i = 1; i <= 7; i++) rememberBatch(batch(i), s);
    expect(readBatches(s).map((b) => b.id)).toEqual(['b7', 'b6', 'b5', 'b4', 'b3']);
  });
  it('survives garbage in storage', () => {
    const s = memoryStorage();
    s.setItem('keywarden.batches', '{not json');
    expect(readBatches(s)).toEqual([]);
  });
});

describe('bulk actions', () => {
  it('send one call per row and count successes and failures with the detail', async () => {
    const calls: number[] = [];
    const progress: number[] = [];
    const r = await runBulk(
      [1, 2, 3, 4, 5],
      async (n) => {
        calls.push(n);
        if (n % 2 === 0) throw new Error(`row ${n} refused`);
      },
      (done) => progress.push(done),
      { concurrency: 2 },
    );
    expect(calls.sort()).toEqual([1, 2, 3, 4, 5]);
    expect(r.succeeded).toBe(3);
    expect(r.failed.map((f) => [f.item, f.detail])).toEqual([
      [2, 'row 2 refused'],
      [4, 'row 4 refused'],
    ]);
    expect(progress).toEqual([0, 1, 2, 3, 4, 5]);
    expect(r.notSent).toBe(0);
  });
  it('send nothing more once cancelled; the requests already sent finish and count', async () => {
    const abort = new AbortController();
    const calls: number[] = [];
    const r = await runBulk(
      Array.from({ length: 100 }, (_, i) => i),
      async (n) => {
        calls.push(n);
        if (n === 9) abort.abort();
        await Promise.resolve();
      },
      undefined,
      { concurrency: 3, signal: abort.signal },
    );
    expect(calls.length).toBeLessThanOrEqual(12);
    expect(r.succeeded).toBe(calls.length);
    expect(r.notSent).toBe(100 - calls.length);
  });
});

describe('server errors', () => {
  it('put each 422 message next to the field it names', () => {
    const e = apiError(422, 'Unprocessable Entity', {
      detail: [
        { loc: ['body', 'heartbeat_interval'], msg: 'Expected integer', type: 'integer' },
        {
          loc: ['body', 'key_costs', 'days:30'],
          msg: 'Expected integer to be greater or equal to 0',
          type: 'integer_minimum',
        },
      ],
    });
    expect(e.field('heartbeat_interval')).toBe('Enter a whole number.');
    expect(e.field('key_costs')).toBe('Enter 0 or more.');
    expect(e.field('key_costs.days:30')).toBe('Enter 0 or more.');
    expect(e.field('name')).toBeUndefined();
  });
  it('carry the detail text, the lockout delay, and a readable message for anything else', () => {
    const locked = apiError(429, '', { detail: 'Too many failed attempts, try again later.' }, '900');
    expect([locked.message, locked.retryAfter]).toEqual(['Too many failed attempts, try again later.', 900]);
    expect(apiError(502, 'Bad Gateway', '<html>nginx</html>').message).toBe('The server answered 502 Bad Gateway.');
    expect(apiError(426, '', { detail: { message: 'Update now' } }).message).toBe('Update now');
  });
});

describe('activation time', () => {
  it('is expires_at minus the duration', () => {
    expect(activatedAt({ expires_at: '2026-02-01T00:00:00.000Z', duration_value: 31, duration_unit: 'days' })).toBe(
      '2026-01-01T00:00:00.000Z',
    );
    expect(activatedAt({ expires_at: '2026-01-01T05:00:00.000Z', duration_value: 5, duration_unit: 'hours' })).toBe(
      '2026-01-01T00:00:00.000Z',
    );
    expect(activatedAt({ expires_at: '2026-03-02T00:00:00.000Z', duration_value: 2, duration_unit: 'months' })).toBe(
      '2026-01-01T00:00:00.000Z',
    );
  });
  it('is unknown for never-activated and lifetime keys', () => {
    expect(activatedAt({ expires_at: null, duration_value: 30, duration_unit: 'days' })).toBeNull();
    expect(
      activatedAt({ expires_at: '2026-01-01T00:00:00.000Z', duration_value: null, duration_unit: 'lifetime' }),
    ).toBeNull();
  });
});

describe('csv download', () => {
  it('quotes every cell and defuses spreadsheet formulas in notes', () => {
    const csv = keysCsv([
      { id: '1', key: 'AB-CD', level: 2, duration_value: 30, duration_unit: 'days', note: '=HYPERLINK("x")' },
    ]);
    expect(csv).toBe('"key","level","duration","unit","note"\r\n"AB-CD","2","30","days","\'=HYPERLINK(""x"")"\r\n');
  });
});
