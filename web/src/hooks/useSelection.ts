// A row selection that is not limited to the rows in the DOM or in the cache: a map from id to the
// little a bulk action needs of the row (for "all N matching", collected from every cursor page).
// It empties when `scope` changes (other filters select other rows). `toggle` keeps its identity,
// so memoized rows can take it.
import { useCallback, useMemo, useState } from 'react';

export interface Selection<R extends { id: string }> {
  map: ReadonlyMap<string, R>;
  size: number;
  has: (id: string) => boolean;
  toggle: (row: R, on: boolean) => void;
  setMany: (rows: readonly R[], on: boolean) => void;
  replace: (rows: readonly R[]) => void;
  clear: () => void;
}

export function useSelection<R extends { id: string }>(scope: string): Selection<R> {
  const [state, setState] = useState<{ scope: string; map: ReadonlyMap<string, R> }>({ scope, map: new Map() });
  const map = state.scope === scope ? state.map : new Map<string, R>();
  const update = useCallback((fn: (m: Map<string, R>) => void) => {
    setState((prev) => {
      const m = new Map(prev.scope === scope ? prev.map : []);
      fn(m);
      return { scope, map: m };
    });
  }, [scope]);
  const toggle = useCallback((row: R, on: boolean) => update((m) => void (on ? m.set(row.id, row) : m.delete(row.id))), [update]);
  const setMany = useCallback((rows: readonly R[], on: boolean) => update((m) => {
    for (const r of rows) {
      if (on) m.set(r.id, r);
      else m.delete(r.id);
    }
  }), [update]);
  const replace = useCallback((rows: readonly R[]) => setState({ scope, map: new Map(rows.map((r) => [r.id, r])) }), [scope]);
  const clear = useCallback(() => setState({ scope, map: new Map() }), [scope]);
  return useMemo(() => ({ map, size: map.size, has: (id: string) => map.has(id), toggle, setMany, replace, clear }), [map, toggle, setMany, replace, clear]);
}
