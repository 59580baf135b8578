// Every record of a cursor listing, page after page (for "select all N matching"): the pages are
// read one at a time in order, since each one's cursor comes from the page before it. Progress is
// reported after each page and an aborted signal stops before the next request.
import type { CursorPage } from './page-chain.js';

export interface WalkResult<R> {
  rows: R[];
  /** False when the signal stopped the walk before the last page. */
  complete: boolean;
}

export async function walkPages<T, R>(
  fetchPage: (cursor: string) => Promise<CursorPage<T>>,
  pick: (item: T) => R,
  { signal, onProgress = () => undefined, maxPages = 100_000 }: {
    signal?: AbortSignal;
    onProgress?: (collected: number) => void;
    /** A bound on requests should a server ever hand back a cursor loop. */
    maxPages?: number;
  } = {},
): Promise<WalkResult<R>> {
  const rows: R[] = [];
  const seen = new Set<string>();
  let cursor = '';
  for (let n = 0; n < maxPages; n++) {
    if (signal?.aborted) return { rows, complete: false };
    const page = await fetchPage(cursor);
    for (const item of page.items) rows.push(pick(item));
    onProgress(rows.length);
    if (page.next === null || page.items.length === 0) return { rows, complete: true };
    if (seen.has(page.next)) return { rows, complete: false };
    seen.add(page.next);
    cursor = page.next;
  }
  return { rows, complete: false };
}
