// Which cursor pages of a listing are known, as a pure state: page 0 starts at '' and page i+1 at
// page i's next cursor. A windowed table asks this which page holds row r and how many rows it
// can show; each page is fetched (and refetched by a live event) only while its rows are in view.
//
// The listings (docs/protocol.md 9 and 15.1) return a next cursor only after a full page, so every page but
// the last holds exactly `size` rows, and row r is row r % size of page floor(r / size) without
// loading the pages in between.

export interface CursorPage<T> {
  items: readonly T[];
  next: string | null;
}

export interface PageChain {
  /** Start cursor of every page known to exist. */
  readonly starts: readonly string[];
  /** True once the last page in `starts` was loaded and had no next cursor. */
  readonly complete: boolean;
  /** Rows of the last page once `complete` (0 for an empty listing). */
  readonly lastSize: number;
}

export const EMPTY_CHAIN: PageChain = { starts: [''], complete: false, lastSize: 0 };

/** Rows known to exist: full pages, plus the last one once the end is known. */
export function knownRows(c: PageChain, size: number): number {
  return (c.starts.length - 1) * size + (c.complete ? c.lastSize : 0);
}

/** What a windowed table renders: the known rows plus one "loading more" row while the end is unknown. */
export function virtualCount(c: PageChain, size: number): number {
  return knownRows(c, size) + (c.complete ? 0 : 1);
}

/** The pages that rows `first`..`last` (inclusive, as virtual indexes) fall on, the loading row's page included. */
export function pagesInRange(c: PageChain, size: number, first: number, last: number): number[] {
  const max = c.starts.length - 1;
  const from = Math.min(max, Math.max(0, Math.floor(first / size)));
  const to = Math.min(max, Math.max(from, Math.floor(last / size)));
  const out: number[] = [];
  for (let p = from; p <= to; p++) out.push(p);
  return out;
}

/**
 * The chain after page `index` answered. A changed next cursor replaces the following page's start
 * (that page is fetched again when it is in view) and keeps the pages after it, so the row count and
 * the scroll position stay put while a live event reorders the listing; a page that now ends the
 * listing drops every page after it.
 */
export function pageLoaded<T>(c: PageChain, size: number, index: number, page: CursorPage<T>): PageChain {
  if (index < 0 || index >= c.starts.length) return c; // a page of a chain that has since been cut
  const last = index === c.starts.length - 1;
  if (page.next === null) {
    if (last && c.complete && c.lastSize === page.items.length) return c;
    return { starts: c.starts.slice(0, index + 1), complete: true, lastSize: Math.min(page.items.length, size) };
  }
  if (last) return { starts: [...c.starts, page.next], complete: false, lastSize: 0 };
  if (c.starts[index + 1] === page.next) return c;
  const starts = [...c.starts];
  starts[index + 1] = page.next;
  return { ...c, starts };
}
