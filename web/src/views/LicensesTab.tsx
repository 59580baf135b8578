// Licenses: filters, search, a windowed table whose cursor pages are fetched as they scroll into
// view, computed status and activation time, a row actions menu, a selection that can span every
// key matching the filters, bulk actions (one request per row, progress, Cancel, succeeded, failed
// and not-sent counts; over all matching keys one server job, its progress from the live stream),
// extend-all, import, who created each key, and the generator for callers with generate_keys.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, jobs as jobsApi, licenses as licensesApi, team as teamApi } from '../api/endpoints.js';
import type { App, Job, License, Stats } from '../api/responses.js';
import { DataTable, type RowSelection } from '../components/DataTable.js';
import { RowMenu, useRowMenu } from '../components/RowMenu.js';
import { Button, Confirm, ErrorState, Loading, fieldError } from '../components/ui.js';
import { usePagedList } from '../hooks/usePagedList.js';
import { useSelection } from '../hooks/useSelection.js';
import { runBulk, type BulkResult } from '../lib/bulk.js';
import { can, isManager, showsStats } from '../lib/permissions.js';
import { formatCount, plural } from '../lib/plural.js';
import { walkPages } from '../lib/walk-pages.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';
import { GeneratorPanel } from './GeneratorPanel.js';
import { ACTION_LABEL, creatorOf, licenseColumns, rowOffers, type Action } from './LicenseColumns.js';
import { BulkBar, BulkReport, JobReport, ProgressLine, type Progress, type SelectedKey } from './LicenseBulk.js';
import { ExtendAllDialog, ExtendDialog } from './LicenseDialogs.js';
import { KeyDrawer } from './KeyDrawer.js';
import { ImportDialog } from './ImportDialog.js';

export { statusTone } from './LicenseColumns.js';

const STATUS_FILTERS = [
  ['', 'All statuses'],
  ['active', 'Active'],
  ['unactivated', 'Unactivated'],
  ['expired', 'Expired'],
  ['banned', 'Banned'],
  ['unused', 'Stored: unused'],
  ['pending', 'Stored: pending'],
  ['used', 'Stored: used'],
] as const;
/** Rows per page the table fetches as it scrolls. */
export const PAGE = 100;
/** Rows per request when collecting every matching key (the listing's maximum). */
const WALK_PAGE = 1000;
/** Progress is redrawn at most this often during a long run. */
const PROGRESS_MS = 100;

/** Keys matching a status filter according to the stats (the computed statuses it counts), else unknown. */
function statsCount(stats: Stats | undefined, status: string): number | null {
  if (!stats) return null;
  switch (status) {
    case '':
      return stats.keys.total;
    case 'active':
    case 'unactivated':
    case 'expired':
    case 'banned':
      return stats.keys[status];
    default:
      return null;
  }
}

function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

/** A progress setter that redraws at most every PROGRESS_MS, and always for the first and last step. */
function throttled(set: (p: Progress) => void, base: Omit<Progress, 'done' | 'total'>) {
  let last = 0;
  return (done: number, total: number | null) => {
    const now = performance.now();
    if (done === 0 || done === total || now - last >= PROGRESS_MS) {
      last = now;
      set({ ...base, done, total });
    }
  };
}

export function LicensesTab({ app }: { app: App }) {
  const { account, caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [status, setStatus] = useState('');
  const [search, setSearch] = useState('');
  const q = useDebounced(search.trim(), 300);
  const scope = `${status}\n${q}`;
  const [generatorOpen, setGeneratorOpen] = useState(false);
  const [pending, setPending] = useState<{ action: Action; rows: SelectedKey[]; all: boolean } | null>(null);
  const [progress, setProgress] = useState<Progress | null>(null);
  const [result, setResult] = useState<{ label: string; result: BulkResult<SelectedKey> } | null>(null);
  // "All N matching" was collected for these filters: an action on it is one server job over the filters.
  const [walked, setWalked] = useState<{ scope: string; count: number } | null>(null);
  const [activeJob, setActiveJob] = useState<{ id: string; label: string } | null>(null);
  const [jobResult, setJobResult] = useState<{ label: string; job: Job } | null>(null);
  const [extendAllOpen, setExtendAllOpen] = useState(false);
  const [importOpen, setImportOpen] = useState(false);
  const [drawer, setDrawer] = useState<License | null>(null);

  const fetchPage = useCallback(
    async (cursor: string, limit: number = PAGE) => {
      const page = await licensesApi.list(app.id, {
        limit,
        ...(status ? { status: status as never } : {}),
        ...(q ? { q } : {}),
        ...(cursor ? { cursor } : {}),
      });
      return { items: page.items, next: page.next_cursor };
    },
    [app.id, status, q],
  );
  const list = usePagedList<License>({ queryKey: ['licenses', app.id, status, q], pageSize: PAGE, fetchPage });
  const selection = useSelection<SelectedKey>(scope);
  // Owners, admins and developers see every key, so the stats count what the listing holds.
  const stats = useQuery({
    queryKey: ['stats', app.id],
    queryFn: () => appsApi.stats(app.id),
    enabled: showsStats(caller) && isManager(caller),
  });
  const matching = list.complete ? list.rows : q ? null : isManager(caller) ? statsCount(stats.data, status) : null;

  const actions = useMemo<Action[]>(
    () => [
      ...(isManager(caller) ? ['extend' as const] : []),
      ...(can(caller, 'reset_hwid') ? ['reset' as const] : []),
      ...(can(caller, 'ban_unban_keys') ? ['ban' as const, 'unban' as const] : []),
      ...(can(caller, 'delete_keys') ? ['delete' as const] : []),
    ],
    [caller],
  );

  const allMatching = walked !== null && walked.scope === scope && selection.size === walked.count;

  // The job in flight: live events (useLive) update this query; it also asks every 2 s in case the feed is down.
  const job = useQuery({
    queryKey: ['job', activeJob?.id],
    queryFn: () => jobsApi.get(activeJob!.id),
    enabled: activeJob !== null,
    refetchInterval: 2000,
  });
  const jobStatus = job.data?.status;
  useEffect(() => {
    if (!activeJob || !jobStatus || jobStatus === 'running') return;
    const ended = activeJob;
    setActiveJob(null);
    // The final answer names the skipped keys.
    void jobsApi
      .get(ended.id)
      .then((j) => setJobResult({ label: ended.label, job: j }))
      .catch((err: unknown) => notice('error', err instanceof Error ? err.message : String(err)));
    selection.clear();
    void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
    void qc.invalidateQueries({ queryKey: ['stats', app.id] });
  }, [activeJob, jobStatus, notice, selection, qc, app.id]);

  /** One server job over every key matching the filters (docs/api.md "Bulk jobs"). */
  const runJob = async (action: Action, count: number, extend?: { value: number; unit: string; subtract: boolean }) => {
    const label = `${ACTION_LABEL[action]} ${plural(count, 'key')}`;
    setPending(null);
    setResult(null);
    setJobResult(null);
    try {
      const started = await jobsApi.start(app.id, {
        action: action === 'reset' ? 'reset_hwid' : action,
        filter: { ...(status ? { status: status as never } : {}), ...(q ? { q } : {}) },
        ...(extend ? { params: { value: extend.value, unit: extend.unit as 'days', subtract: extend.subtract } } : {}),
      });
      qc.setQueryData(['job', started.id], started);
      setActiveJob({ id: started.id, label });
    } catch (err) {
      notice('error', err instanceof Error ? err.message : String(err));
    }
  };

  const run = async (
    action: Action,
    targets: SelectedKey[],
    extend?: { value: number; unit: string; subtract: boolean },
    all = false,
  ) => {
    if (all) return runJob(action, targets.length, extend);
    const label = `${ACTION_LABEL[action]} ${targets.length === 1 ? targets[0]!.key_preview : plural(targets.length, 'key')}`;
    const abort = new AbortController();
    // The confirmation closes as the run starts, so its progress and Cancel are in reach.
    setPending(null);
    setResult(null);
    const r = await runBulk(
      targets,
      (row) => {
        switch (action) {
          case 'extend':
            return licensesApi.extend(row.id, {
              value: extend!.value,
              unit: extend!.unit as 'days',
              subtract: extend!.subtract,
            });
          case 'reset':
            return licensesApi.resetHwid(row.id);
          case 'ban':
            return licensesApi.setBanned(row.id, true);
          case 'unban':
            return licensesApi.setBanned(row.id, false);
          case 'delete':
            return licensesApi.remove(row.id);
        }
      },
      throttled(setProgress, { label, cancel: () => abort.abort() }),
      { signal: abort.signal },
    );
    setProgress(null);
    selection.clear();
    if (targets.length === 1 && r.failed.length === 0) notice('ok', `${label}: done`);
    else setResult({ label, result: r });
    if (targets.length === 1 && r.failed.length === 1) notice('error', r.failed[0]!.detail);
    void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
    void qc.invalidateQueries({ queryKey: ['stats', app.id] });
  };

  const start = (action: Action, targets: SelectedKey[]) => {
    if (targets.length === 0) return;
    const all = allMatching && targets.length > 1;
    if (action === 'extend' || action === 'delete' || targets.length > 1) setPending({ action, rows: targets, all });
    else void run(action, targets);
  };

  const selectAllMatching = async () => {
    const abort = new AbortController();
    const report = throttled(setProgress, { label: 'Collecting matching keys', cancel: () => abort.abort() });
    report(0, matching);
    try {
      const r = await walkPages(
        (cursor) => fetchPage(cursor, WALK_PAGE),
        (k) => ({ id: k.id, key_preview: k.key_preview }),
        {
          signal: abort.signal,
          onProgress: (n) => report(n, matching !== null ? Math.max(matching, n) : null),
        },
      );
      if (r.complete) {
        selection.replace(r.rows);
        setWalked({ scope, count: r.rows.length });
      } else notice('error', 'Stopped: the selection is unchanged.');
    } catch (err) {
      notice('error', err instanceof Error ? err.message : String(err));
    } finally {
      setProgress(null);
    }
  };

  // The row menu and the columns keep their identity across selection changes and progress, so a
  // ticked checkbox re-renders its own row only; the latest state is read through refs.
  const menu = useRowMenu();
  // The drawer edits the key for those PATCH allows (docs/protocol.md 15.2); others only look.
  const detailsLabel = isManager(caller) || can(caller, 'generate_keys') ? 'Edit / details' : 'Details';
  const live = useRef({ start, busy: false, details: setDrawer });
  live.current = { start, busy: progress !== null || activeJob !== null, details: setDrawer };
  const openMenu = useCallback(
    (row: License, anchor: HTMLElement) =>
      menu.open({
        anchor,
        label: `Actions for ${row.key_preview}`,
        items: [
          { label: detailsLabel, danger: false, disabled: false, onSelect: () => live.current.details(row) },
          ...actions
            .filter((a) => rowOffers(row, a))
            .map((a) => ({
              label: ACTION_LABEL[a],
              danger: a === 'delete',
              disabled: live.current.busy,
              onSelect: () => live.current.start(a, [row]),
            })),
        ],
      }),
    [actions, detailsLabel, menu.open],
  ); // live.current is read when an item is chosen
  const hasHwid = list.rowAt(0)?.hwid !== undefined;
  // "Created by" names members from the team list where the caller may read it (resellers get none).
  // A key of its own: the Team view always asks the server when it opens, so a session ended
  // meanwhile is noticed there (a 401), not hidden behind this tab's copy.
  const team = useQuery({
    queryKey: ['team', 'creators'],
    queryFn: teamApi.list,
    enabled: isManager(caller),
    staleTime: 60_000,
  });
  const creator = useCallback((k: License) => creatorOf(k.created_by, account, team.data), [account, team.data]);
  const columns = useMemo(
    () =>
      licenseColumns({
        hwid: hasHwid,
        actions: true,
        openMenu,
        creator,
        app: { max_devices: app.max_devices, hwid_lock: app.hwid_lock },
      }),
    [hasHwid, actions.length, openMenu, creator, app.max_devices, app.hwid_lock],
  );

  const allLoaded = useMemo(() => {
    const rows = list.loadedRows();
    return rows.length > 0 && rows.every((r) => selection.has(r.id));
  }, [list, selection]);
  const rowSelection = useMemo<RowSelection<License> | undefined>(
    () =>
      actions.length === 0
        ? undefined
        : {
            isSelected: (r) => selection.has(r.id),
            toggle: selection.toggle,
            label: (r) => r.key_preview,
            all: {
              checked: allLoaded,
              indeterminate: selection.size > 0 && !allLoaded,
              label: 'Select all loaded keys',
              toggle: (on) => selection.setMany(list.loadedRows(), on),
            },
          },
    [actions.length, selection, allLoaded, list],
  );

  return (
    <div className="licenses">
      <div className="toolbar">
        <label className="inline-field">
          <span>Status</span>
          <select value={status} onChange={(e) => setStatus(e.target.value)} name="status">
            {STATUS_FILTERS.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </label>
        <label className="inline-field grow">
          <span>Search</span>
          <input
            type="search"
            value={search}
            onChange={(e) => setSearch(e.target.value)}
            placeholder="Note, user or key preview"
            name="q"
          />
        </label>
        <label className="inline-field">
          <input
            type="checkbox"
            name="trials"
            checked={search === 'trial'}
            onChange={(e) => setSearch(e.target.checked ? 'trial' : '')}
          />
          <span>Trials only</span>
        </label>
        {can(caller, 'generate_keys') && !generatorOpen && (
          <Button variant="primary" onClick={() => setGeneratorOpen(true)}>
            Generate keys
          </Button>
        )}
        {isManager(caller) && <Button onClick={() => setExtendAllOpen(true)}>Extend all</Button>}
        {isManager(caller) && <Button onClick={() => setImportOpen(true)}>Import keys</Button>}
        <a className="btn btn-plain" href={appsApi.exportUrl(app.id, 'licenses', { status, q })} download>
          Export CSV
        </a>
      </div>
      {generatorOpen && <GeneratorPanel app={app} onClose={() => setGeneratorOpen(false)} />}
      {fieldError(list.error, 'query.q') && (
        <div className="field-error" role="alert">
          {fieldError(list.error, 'query.q')}
        </div>
      )}

      {selection.size > 0 && actions.length > 0 && (
        <BulkBar
          selected={selection.size}
          matching={matching}
          actions={actions}
          busy={progress !== null || activeJob !== null}
          onAction={(a) => start(a, [...selection.map.values()])}
          onSelectAll={() => void selectAllMatching()}
          onClear={selection.clear}
        />
      )}
      {progress && <ProgressLine progress={progress} />}
      {activeJob && (
        <ProgressLine
          progress={{
            label: activeJob.label,
            done: job.data?.done ?? 0,
            total: job.data?.total ?? null,
            cancel: () =>
              void jobsApi.cancel(activeJob.id).catch((err: unknown) => notice('error', (err as Error).message)),
          }}
        />
      )}
      {result && <BulkReport label={result.label} result={result.result} onClose={() => setResult(null)} />}
      {jobResult && <JobReport label={jobResult.label} job={jobResult.job} onClose={() => setJobResult(null)} />}

      {list.isPending && <Loading label="Loading keys" />}
      {list.error !== null && !fieldError(list.error, 'query.q') && (
        <ErrorState error={list.error} retry={list.retry} />
      )}
      {!list.isPending && (list.rows > 0 || list.complete) && (
        <>
          <p className="muted small table-count" data-testid="licenses-count">
            {list.complete
              ? plural(list.rows, 'key')
              : matching !== null
                ? plural(matching, 'key')
                : `${formatCount(list.rows)}+ keys`}
            {status || q ? ' match these filters' : ''}
          </p>
          <DataTable
            caption="License keys"
            testId="licenses-table"
            className="licenses-table"
            columns={columns}
            count={list.count}
            rowAt={list.rowAt}
            rowId={(r) => r.id}
            onRange={list.setRange}
            resetKey={scope}
            {...(rowSelection ? { selection: rowSelection } : {})}
            loading={<span className="muted">Loading more keys…</span>}
            empty={
              status || q
                ? 'No key matches these filters.'
                : can(caller, 'generate_keys')
                  ? 'No keys yet. Generate some above.'
                  : 'No keys yet.'
            }
          />
        </>
      )}
      <RowMenu menu={menu.menu} onClose={menu.close} />

      <ExtendDialog
        pending={pending?.action === 'extend' ? pending.rows : null}
        onClose={() => setPending(null)}
        onSubmit={(v) => void run('extend', pending!.rows, v, pending!.all)}
        busy={progress !== null}
      />
      <Confirm
        open={pending !== null && pending.action !== 'extend'}
        title={
          pending
            ? `${ACTION_LABEL[pending.action]} ${pending.rows.length === 1 ? 'this key' : plural(pending.rows.length, 'key')}?`
            : ''
        }
        message={
          pending?.action === 'delete'
            ? 'Deleted keys are gone for good; a bound user is refused at its next request.'
            : pending?.all
              ? 'The server applies it to every matching key as one job; you will see its progress and can cancel it.'
              : 'One request is sent per key; you will see how many succeeded and failed, and can cancel the rest.'
        }
        confirmLabel={
          pending
            ? `${ACTION_LABEL[pending.action]}${pending.rows.length > 1 ? ` ${plural(pending.rows.length, 'key')}` : ''}`
            : ''
        }
        busy={progress !== null}
        onConfirm={() => pending && void run(pending.action, pending.rows, undefined, pending.all)}
        onClose={() => setPending(null)}
      />
      <ExtendAllDialog app={app} open={extendAllOpen} onClose={() => setExtendAllOpen(false)} />
      <ImportDialog app={app} open={importOpen} onClose={() => setImportOpen(false)} />
      <KeyDrawer app={app} license={drawer} onClose={() => setDrawer(null)} />
    </div>
  );
}
