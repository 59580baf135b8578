// A cursor listing for a windowed table: each page is its own query (`[...queryKey, 'page', start]`),
// observed only while one of its rows is in view. So a page is fetched when it is scrolled to, and a
// live event (an invalidation of the listing's key) refetches the pages on screen, not every page
// loaded so far; the others are marked stale and refetched if they come back into view.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useQueries, useQueryClient, type QueryKey } from '@tanstack/react-query';
import {
  EMPTY_CHAIN,
  knownRows,
  pageLoaded,
  pagesInRange,
  virtualCount,
  type CursorPage,
  type PageChain,
} from '../lib/page-chain.js';

export interface PagedList<T> {
  /** Rows a table renders: the known rows plus one loading row while the end is unknown. */
  count: number;
  /** Rows known to exist. */
  rows: number;
  /** The end of the listing has been reached. */
  complete: boolean;
  /** Row `index`, or undefined while its page is loading. */
  rowAt(index: number): T | undefined;
  /** The virtual rows in view (inclusive), from the table; pages are observed accordingly. */
  setRange(first: number, last: number): void;
  /** Nothing known yet and the first page is on its way. */
  isPending: boolean;
  /** A failed page in view, with a retry of the failed pages. */
  error: unknown;
  retry(): void;
  /** Every row of the pages still in the cache (for "select all loaded"). */
  loadedRows(): T[];
}

export function usePagedList<T>({
  queryKey,
  pageSize,
  fetchPage,
}: {
  queryKey: QueryKey;
  pageSize: number;
  fetchPage: (cursor: string) => Promise<CursorPage<T>>;
}): PagedList<T> {
  const qc = useQueryClient();
  const listKey = JSON.stringify(queryKey);
  const [state, setState] = useState<{ listKey: string; chain: PageChain }>({ listKey, chain: EMPTY_CHAIN });
  const chain = state.listKey === listKey ? state.chain : EMPTY_CHAIN;
  // The span of pages in view, updated only when a row of another page comes into view.
  const [span, setSpan] = useState<{ listKey: string; first: number; last: number }>({ listKey, first: 0, last: 0 });
  const range = span.listKey === listKey ? span : { first: 0, last: 0 };
  const pages = pagesInRange(chain, pageSize, range.first, range.last);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;

  const pageKey = useCallback((start: string): QueryKey => [...queryKey, 'page', start], [listKey]); // listKey is queryKey, as a string
  const results = useQueries({
    queries: pages.map((p) => {
      const start = chain.starts[p]!;
      return { queryKey: pageKey(start), queryFn: () => fetchRef.current(start) };
    }),
  });

  // While a page in view is fetched again under a new start cursor (a live event moved the rows
  // before it), its previous rows stay on screen instead of blanks.
  const shown = useRef(new Map<number, readonly T[]>());
  const current = new Map<number, readonly T[]>();
  pages.forEach((p, i) => {
    const items = results[i]?.data?.items ?? shown.current.get(p);
    if (items) current.set(p, items);
  });
  shown.current = current;

  const stamp = pages
    .map((p, i) => `${p}:${chain.starts[p]}:${results[i]?.status}:${results[i]?.dataUpdatedAt ?? 0}`)
    .join(',');
  useEffect(() => {
    setState((prev) => {
      let next = prev.listKey === listKey ? prev.chain : EMPTY_CHAIN;
      pages.forEach((p, i) => {
        const data = results[i]?.data;
        // Only an answer for the page's current start cursor moves the chain.
        if (data && next.starts[p] === chain.starts[p]) next = pageLoaded(next, pageSize, p, data);
      });
      return prev.listKey === listKey && next === prev.chain ? prev : { listKey, chain: next };
    });
  }, [stamp, listKey]); // on a page landing or a new list, not each render

  const setRange = useCallback(
    (first: number, last: number) => {
      const a = Math.floor(first / pageSize);
      const b = Math.floor(last / pageSize);
      setSpan((prev) =>
        prev.listKey === listKey && Math.floor(prev.first / pageSize) === a && Math.floor(prev.last / pageSize) === b
          ? prev
          : { listKey, first, last },
      );
    },
    [listKey, pageSize],
  );

  const failed = results.filter((r) => r.isError);
  const rows = knownRows(chain, pageSize);
  return useMemo<PagedList<T>>(
    () => ({
      count: virtualCount(chain, pageSize),
      rows,
      complete: chain.complete,
      rowAt: (index) => current.get(Math.floor(index / pageSize))?.[index % pageSize],
      setRange,
      isPending: rows === 0 && !chain.complete && results.some((r) => r.isPending),
      error: failed[0]?.error ?? null,
      retry: () => failed.forEach((r) => void r.refetch()),
      loadedRows: () => chain.starts.flatMap((s) => qc.getQueryData<CursorPage<T>>(pageKey(s))?.items ?? []),
    }),
    [chain, stamp, failed.length, setRange, qc, pageKey],
  ); // the other inputs are read when called
}
