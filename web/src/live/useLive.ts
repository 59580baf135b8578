// Keeps the open application's views current: events from the live feed refresh the affected
// queries (at most every 250 ms, so a bulk action's burst costs one refetch); while the feed is
// down the queries are refreshed every 10 s.
import { useEffect, useRef, useState } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { LiveFeed, type LiveEvent, type LiveStatus } from './live.js';

/** Query keys (under the app id) an event kind makes stale. */
export function staleKeysFor(kind: string): string[] {
  if (kind.startsWith('heartbeat.')) return ['logs', 'stats'];
  if (kind.startsWith('user.')) return ['users', 'logs', 'stats'];
  return ['licenses', 'users', 'logs', 'stats'];
}

const ALL = ['licenses', 'users', 'logs', 'stats', 'bans'];

export function useLive(appId: string, onAppDeleted: () => void): { status: LiveStatus; retryAt: number | null } {
  const qc = useQueryClient();
  const [state, setState] = useState<{ status: LiveStatus; retryAt: number | null }>({
    status: 'connecting',
    retryAt: null,
  });
  const deleted = useRef(onAppDeleted);
  deleted.current = onAppDeleted;

  useEffect(() => {
    const pending = new Set<string>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      timer = undefined;
      for (const k of pending) void qc.invalidateQueries({ queryKey: [k, appId] });
      pending.clear();
    };
    const stale = (keys: string[]) => {
      for (const k of keys) pending.add(k);
      timer ??= setTimeout(flush, 250);
    };
    const feed = new LiveFeed({
      appId,
      onEvent: (e: LiveEvent) => {
        if (e.kind === 'app.delete') deleted.current();
        // The signed-in reseller's balance changed (a top-up, a deduction, a spend): read it again.
        else if (e.kind === 'account.credits') void qc.invalidateQueries({ queryKey: ['me'] });
        // A bulk job of ours moved on: its progress line reads this (LicensesTab.tsx).
        else if (e.kind === 'job.progress')
          qc.setQueryData(['job', e.data.id], (old: object | undefined) => ({ ...old, ...e.data }));
        else stale(staleKeysFor(e.kind));
      },
      onPoll: () => stale(ALL),
      onStatus: (status, retryAt) => setState({ status, retryAt }),
      // Ask who we are: a 401 there signs the page out with the reason (App.tsx).
      onRevoked: () => void qc.invalidateQueries({ queryKey: ['me'] }),
    });
    feed.start();
    return () => {
      feed.stop();
      clearTimeout(timer);
    };
  }, [appId, qc]);
  return state;
}
