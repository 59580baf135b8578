// One application: stats tiles and charts (view_stats), the tabs docs/spec.md "Dashboard roles" rule 2 allows, the
// live-update state, and the current tab.
import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import type { App } from '../api/responses.js';
import { Badge, ErrorState, Loading } from '../components/ui.js';
import { resolveTab, showsStats, TAB_LABELS, visibleTabs, type Tab } from '../lib/permissions.js';
import { useLive } from '../live/useLive.js';
import { useTitle } from '../hooks/useTitle.js';
import { Link, navigate, paths } from '../router.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';
import { LicensesTab } from './LicensesTab.js';
import { UsersTab } from './UsersTab.js';
import { SecurityTab } from './SecurityTab.js';
import { LogsTab } from './LogsTab.js';
import { IntegrationTab } from './IntegrationTab.js';
import { SettingsTab } from './SettingsTab.js';
import { ProductsTab } from './ProductsTab.js';
import { ReleasesTab } from './ReleasesTab.js';
import { ChartPanel } from './Charts.js';

export function AppView({ appId, tab }: { appId: string; tab: string | undefined }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const app = useQuery({ queryKey: ['app', appId], queryFn: () => appsApi.get(appId) });
  const current = resolveTab(caller, tab);
  const tabs = visibleTabs(caller);
  const live = useLive(appId, () => {
    notice('error', 'This application was deleted.');
    void qc.invalidateQueries({ queryKey: ['apps'] });
    navigate(paths.apps(), true);
  });

  useTitle(TAB_LABELS[current], app.data?.name ?? (app.isError ? 'Application not available' : undefined));

  // A tab the caller may not open (or none) shows the default one, and the address says so.
  useEffect(() => {
    if (tab !== current) navigate(paths.app(appId, current), true);
  }, [tab, current, appId]);

  // On a narrow screen the tab strip scrolls sideways: the current tab is scrolled into it.
  const tabsRef = useRef<HTMLElement>(null);
  useLayoutEffect(() => {
    const strip = tabsRef.current;
    const tabEl = strip?.querySelector<HTMLElement>('[aria-current="page"]');
    if (!strip || !tabEl) return;
    const s = strip.getBoundingClientRect();
    const r = tabEl.getBoundingClientRect();
    if (r.left < s.left) strip.scrollLeft += r.left - s.left - 12;
    else if (r.right > s.right) strip.scrollLeft += r.right - s.right + 12;
  }, [current, app.isSuccess]);

  if (app.isPending) return <Loading label="Loading application" />;
  if (app.isError) {
    return (
      <>
        <ErrorState error={app.error} retry={() => void app.refetch()} />
        <p>
          <Link to={paths.apps()}>Back to your applications</Link>
        </p>
      </>
    );
  }
  const a = app.data;
  return (
    <section aria-labelledby="app-title">
      <div className="page-head">
        <h1 id="app-title">{a.name}</h1>
        <div className="badges">
          <Badge tone="blue">v{a.version}</Badge>
          {a.enabled ? <Badge tone="green">Enabled</Badge> : <Badge tone="red">Disabled</Badge>}
          {a.keys_paused && <Badge tone="amber">Keys paused</Badge>}
        </div>
        <LiveState status={live.status} retryAt={live.retryAt} />
      </div>
      {showsStats(caller) && <StatsTiles appId={appId} />}
      {showsStats(caller) && <ChartPanel appId={appId} />}
      <nav className="tabs" aria-label="Application sections" ref={tabsRef}>
        {tabs.map((t) => (
          <Link
            key={t}
            to={paths.app(appId, t)}
            className="tab"
            aria-current={t === current ? 'page' : undefined}
            data-tab={t}
          >
            {TAB_LABELS[t]}
          </Link>
        ))}
      </nav>
      <div className="tab-panel">
        <TabContent tab={current} app={a} />
      </div>
    </section>
  );
}

function TabContent({ tab, app }: { tab: Tab; app: App }) {
  switch (tab) {
    case 'licenses':
      return <LicensesTab app={app} />;
    case 'users':
      return <UsersTab app={app} />;
    case 'security':
      return <SecurityTab app={app} />;
    case 'logs':
      return <LogsTab app={app} />;
    case 'integration':
      return <IntegrationTab app={app} />;
    case 'products':
      return <ProductsTab app={app} />;
    case 'releases':
      return <ReleasesTab app={app} />;
    case 'settings':
      return <SettingsTab app={app} />;
  }
}

function LiveState({ status, retryAt }: { status: string; retryAt: number | null }) {
  const [, tick] = useState(0);
  useEffect(() => {
    if (status !== 'paused') return;
    const t = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [status]);
  if (status === 'live')
    return (
      <span className="live live-on" title="Changes made elsewhere appear here within seconds">
        ● Live
      </span>
    );
  if (status === 'connecting') return <span className="live">○ Connecting…</span>;
  const secs = retryAt ? Math.max(0, Math.ceil((retryAt - Date.now()) / 1000)) : 0;
  return (
    <span className="live live-paused" role="status">
      Live updates paused: refreshing every 10 s{secs > 0 ? `, reconnecting in ${secs} s` : ', reconnecting…'}
    </span>
  );
}

function StatsTiles({ appId }: { appId: string }) {
  const stats = useQuery({ queryKey: ['stats', appId], queryFn: () => appsApi.stats(appId) });
  if (stats.isError) return <ErrorState error={stats.error} retry={() => void stats.refetch()} />;
  const s = stats.data;
  const tiles: [string, number | undefined][] = [
    ['Keys', s?.keys.total],
    ['Active', s?.keys.active],
    ['Unactivated', s?.keys.unactivated],
    ['Expired', s?.keys.expired],
    ['Banned', s?.keys.banned],
    ['Users', s?.users],
    ['Live sessions', s?.live_sessions],
    ['Logins (24 h)', s?.logins_24h],
  ];
  return (
    <dl className="tiles" aria-label="Statistics" aria-busy={stats.isPending}>
      {tiles.map(([label, v]) => (
        <div key={label} className="tile">
          <dt>{label}</dt>
          <dd>{v ?? '–'}</dd>
        </div>
      ))}
    </dl>
  );
}
