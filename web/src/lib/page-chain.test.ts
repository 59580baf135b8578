// The cursor-page chain behind the windowed tables, and the walk that collects every matching key.
import { describe, expect, it } from 'vitest';
import { EMPTY_CHAIN, knownRows, pageLoaded, pagesInRange, virtualCount, type CursorPage } from './page-chain.js';
import { walkPages } from './walk-pages.js';

const page = (n: number, next: string | null): CursorPage<number> => ({ items: Array.from({ length: n }, (_, i) => i), next });

describe('page chain', () => {
  it('grows a page at a time and knows the end', () => {
    let c = EMPTY_CHAIN;
    expect([knownRows(c, 10), virtualCount(c, 10)]).toEqual([0, 1]); // just the loading row
    c = pageLoaded(c, 10, 0, page(10, 'c1'));
    c = pageLoaded(c, 10, 1, page(10, 'c2'));
    expect(c.starts).toEqual(['', 'c1', 'c2']);
    expect([knownRows(c, 10), virtualCount(c, 10), c.complete]).toEqual([20, 21, false]);
    c = pageLoaded(c, 10, 2, page(4, null));
    expect([knownRows(c, 10), virtualCount(c, 10), c.complete]).toEqual([24, 24, true]);
  });

  it('maps rows in view to their pages, the loading row to the page being fetched', () => {
    let c = pageLoaded(pageLoaded(EMPTY_CHAIN, 10, 0, page(10, 'c1')), 10, 1, page(10, 'c2'));
    expect(pagesInRange(c, 10, 0, 7)).toEqual([0]);
    expect(pagesInRange(c, 10, 8, 20)).toEqual([0, 1, 2]); // row 20 is the loading row, on page 2
    expect(pagesInRange(c, 10, 55, 70)).toEqual([2]); // stale range after filters changed: clamped
    c = pageLoaded(c, 10, 2, page(0, null));
    expect(pagesInRange(c, 10, 15, 19)).toEqual([1]);
  });

  it('keeps the later pages (and the scroll position) when a refetched page moves its next cursor', () => {
    let c = EMPTY_CHAIN;
    for (let i = 0; i < 4; i++) c = pageLoaded(c, 10, i, page(10, `c${i + 1}`));
    const moved = pageLoaded(c, 10, 1, page(10, 'c2-new'));
    expect(moved.starts).toEqual(['', 'c1', 'c2-new', 'c3', 'c4']);
    expect(knownRows(moved, 10)).toBe(knownRows(c, 10));
    expect(pageLoaded(c, 10, 1, page(10, 'c2'))).toBe(c); // nothing moved: the same state
  });

  it('drops the pages after one that now ends the listing, and ignores pages of a cut chain', () => {
    let c = EMPTY_CHAIN;
    for (let i = 0; i < 3; i++) c = pageLoaded(c, 10, i, page(10, `c${i + 1}`));
    const cut = pageLoaded(c, 10, 1, page(7, null));
    expect([cut.starts, cut.complete, knownRows(cut, 10)]).toEqual([['', 'c1'], true, 17]);
    expect(pageLoaded(cut, 10, 3, page(10, 'x'))).toBe(cut);
    // A listing that grows again after its end was reached.
    expect(pageLoaded(cut, 10, 1, page(10, 'c2')).starts).toEqual(['', 'c1', 'c2']);
  });
});

describe('walking every page', () => {
  const listing = (total: number, size: number) => async (cursor: string): Promise<CursorPage<number>> => {
    const from = cursor ? Number(cursor) : 0;
    const items = Array.from({ length: Math.max(0, Math.min(size, total - from)) }, (_, i) => from + i);
    return { items, next: items.length === size ? String(from + size) : null };
  };

  it('collects every record once, in order, with progress after each page', async () => {
    const progress: number[] = [];
    const r = await walkPages(listing(2_500, 1_000), (n) => ({ id: String(n) }), { onProgress: (n) => progress.push(n) });
    expect(r.complete).toBe(true);
    expect(r.rows.map((x) => Number(x.id))).toEqual(Array.from({ length: 2_500 }, (_, i) => i));
    expect(progress).toEqual([1_000, 2_000, 2_500]);
  });

  it('ends on the empty page after a full last one', async () => {
    const cursors: string[] = [];
    const fetch = listing(2_000, 1_000);
    const r = await walkPages((c) => (cursors.push(c), fetch(c)), (n) => n);
    expect([r.rows.length, r.complete, cursors]).toEqual([2_000, true, ['', '1000', '2000']]);
  });

  it('stops before the next request when cancelled, and on a cursor loop', async () => {
    const abort = new AbortController();
    const fetch = listing(10_000, 1_000);
    const r = await walkPages(async (c) => {
      const p = await fetch(c);
      if (c === '1000') abort.abort();
      return p;
    }, (n) => n, { signal: abort.signal });
    expect([r.rows.length, r.complete]).toEqual([2_000, false]);
    const loop = await walkPages(async () => ({ items: [1], next: 'same' }), (n) => n);
    expect([loop.rows.length, loop.complete]).toEqual([2, false]);
  });
});
