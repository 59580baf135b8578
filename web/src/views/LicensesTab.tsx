// Licenses: filters, search, cursor paging, status and computed status, activation time, row and
// bulk actions (one request per row, progress, succeeded and failed counts), extend-all, and the
// generator for callers with generate_keys.
import { useEffect, useMemo, useState } from 'react';
import { useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import type { ColumnDef, RowSelectionState } from '@tanstack/react-table';
import { licenses as licensesApi } from '../api/endpoints.js';
import type { App, License } from '../api/responses.js';
import { DataTable } from '../components/DataTable.js';
import { Badge, Button, Confirm, Dialog, ErrorState, Field, FormError, Loading, Time, fieldError } from '../components/ui.js';
import { runBulk, type BulkResult } from '../lib/bulk.js';
import { can, isManager } from '../lib/permissions.js';
import { activatedAt, durationLabel } from '../lib/time.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';
import { GeneratorPanel } from './GeneratorPanel.js';

const STATUS_FILTERS = [
  ['', 'All statuses'], ['active', 'Active'], ['unactivated', 'Unactivated'], ['expired', 'Expired'], ['banned', 'Banned'],
  ['unused', 'Stored: unused'], ['pending', 'Stored: pending'], ['used', 'Stored: used'],
] as const;
const PAGE = 50;

type Action = 'extend' | 'reset' | 'ban' | 'unban' | 'delete';
const ACTION_LABEL: Record<Action, string> = { extend: 'Extend', reset: 'Reset HWID', ban: 'Ban', unban: 'Unban', delete: 'Delete' };

/** Row buttons only for what can apply to that key (bulk actions try every selected row and report failures). */
function rowOffers(k: License, a: Action): boolean {
  switch (a) {
    case 'extend': return k.status === 'used' && k.duration_unit !== 'lifetime' && k.expires_at !== null;
    case 'reset': return k.hwid === undefined || (k.hwid ?? '') !== '';
    case 'ban': return k.status !== 'banned';
    case 'unban': return k.status === 'banned';
    case 'delete': return true;
  }
}

export function statusTone(s: string): 'green' | 'red' | 'grey' | 'amber' {
  return s === 'active' ? 'green' : s === 'banned' ? 'red' : s === 'expired' ? 'amber' : 'grey';
}

function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

export function LicensesTab({ app }: { app: App }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [status, setStatus] = useState('');
  const [search, setSearch] = useState('');
  const q = useDebounced(search.trim(), 300);
  const [selection, setSelection] = useState<RowSelectionState>({});
  const [generatorOpen, setGeneratorOpen] = useState(false);
  const [pending, setPending] = useState<{ action: Action; rows: License[] } | null>(null);
  const [progress, setProgress] = useState<{ label: string; done: number; total: number } | null>(null);
  const [result, setResult] = useState<{ label: string; result: BulkResult<License> } | null>(null);
  const [extendAllOpen, setExtendAllOpen] = useState(false);

  const list = useInfiniteQuery({
    queryKey: ['licenses', app.id, status, q],
    queryFn: ({ pageParam }) => licensesApi.list(app.id, {
      limit: PAGE, ...(status ? { status: status as never } : {}), ...(q ? { q } : {}), ...(pageParam ? { cursor: pageParam } : {}),
    }),
    initialPageParam: '' as string,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
  });
  const rows = useMemo(() => list.data?.pages.flatMap((p) => p.items) ?? [], [list.data]);
  const selected = rows.filter((r) => selection[r.id]);
  useEffect(() => setSelection({}), [status, q]);

  const actions: Action[] = [
    ...(isManager(caller) ? ['extend' as const] : []),
    ...(can(caller, 'reset_hwid') ? ['reset' as const] : []),
    ...(can(caller, 'ban_unban_keys') ? ['ban' as const, 'unban' as const] : []),
    ...(can(caller, 'delete_keys') ? ['delete' as const] : []),
  ];

  const run = async (action: Action, targets: License[], extend?: { value: number; unit: string; subtract: boolean }) => {
    const label = `${ACTION_LABEL[action]} ${targets.length === 1 ? targets[0]!.key_preview : `${targets.length} keys`}`;
    setResult(null);
    setProgress({ label, done: 0, total: targets.length });
    const r = await runBulk(targets, (row) => {
      switch (action) {
        case 'extend': return licensesApi.extend(row.id, { value: extend!.value, unit: extend!.unit as 'days', subtract: extend!.subtract });
        case 'reset': return licensesApi.resetHwid(row.id);
        case 'ban': return licensesApi.setBanned(row.id, true);
        case 'unban': return licensesApi.setBanned(row.id, false);
        case 'delete': return licensesApi.remove(row.id);
      }
    }, (done, total) => setProgress({ label, done, total }));
    setProgress(null);
    setPending(null);
    setSelection({});
    if (targets.length === 1 && r.failed.length === 0) notice('ok', `${label}: done`);
    else setResult({ label, result: r });
    if (targets.length === 1 && r.failed.length === 1) notice('error', r.failed[0]!.detail);
    void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
    void qc.invalidateQueries({ queryKey: ['stats', app.id] });
  };

  const start = (action: Action, targets: License[]) => {
    if (targets.length === 0) return;
    if (action === 'extend' || action === 'delete' || targets.length > 1) setPending({ action, rows: targets });
    else void run(action, targets);
  };

  const hasHwid = rows.some((r) => r.hwid !== undefined);
  const columns = useMemo<ColumnDef<License, any>[]>(() => [
    { id: 'key', header: 'Key', cell: ({ row }) => <code className="mono">{row.original.key_preview}</code> },
    {
      id: 'status', header: 'Status', cell: ({ row }) => (
        <span className="status-cell">
          <Badge tone={statusTone(row.original.computed_status)}>{row.original.computed_status}</Badge>
          <span className="muted small" title="Stored status">{row.original.status}</span>
        </span>
      ),
    },
    { id: 'used_by', header: 'Used by', cell: ({ row }) => row.original.used_by || <span className="muted">—</span> },
    { id: 'level', header: 'Level', cell: ({ row }) => row.original.level },
    { id: 'duration', header: 'Duration', cell: ({ row }) => durationLabel(row.original.duration_value, row.original.duration_unit) },
    { id: 'created', header: 'Created', cell: ({ row }) => <Time iso={row.original.created_at} /> },
    { id: 'activated', header: 'Activated', cell: ({ row }) => <Time iso={activatedAt(row.original)} empty={row.original.status === 'used' ? '—' : 'not yet'} /> },
    { id: 'expires', header: 'Expires', cell: ({ row }) => (row.original.duration_unit === 'lifetime' ? 'Never' : <Time iso={row.original.expires_at} empty="on activation" />) },
    ...(hasHwid ? [{ id: 'hwid', header: 'HWID', cell: ({ row }: { row: { original: License } }) => <code className="mono small">{row.original.hwid || '—'}</code> }] : []),
    { id: 'note', header: 'Note', cell: ({ row }) => <span className="clamp">{row.original.note}</span> },
    ...(actions.length > 0 ? [{
      id: 'actions', header: 'Actions', cell: ({ row }: { row: { original: License } }) => (
        <span className="row-actions">
          {actions.filter((a) => rowOffers(row.original, a)).map((a) => (
            <Button key={a} variant={a === 'delete' ? 'danger' : 'ghost'} className="small" disabled={progress !== null}
              aria-label={`${ACTION_LABEL[a]} ${row.original.key_preview}`} onClick={() => start(a, [row.original])}>{ACTION_LABEL[a]}</Button>
          ))}
        </span>
      ),
    }] : []),
  ], [hasHwid, actions.join(','), progress !== null]); // eslint-disable-line react-hooks/exhaustive-deps

  return (
    <div className="licenses">
      <div className="toolbar">
        <label className="inline-field">
          <span>Status</span>
          <select value={status} onChange={(e) => setStatus(e.target.value)} name="status">
            {STATUS_FILTERS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
          </select>
        </label>
        <label className="inline-field grow">
          <span>Search</span>
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="Note, user or key preview" name="q" />
        </label>
        {can(caller, 'generate_keys') && !generatorOpen && <Button variant="primary" onClick={() => setGeneratorOpen(true)}>Generate keys</Button>}
        {isManager(caller) && <Button onClick={() => setExtendAllOpen(true)}>Extend all</Button>}
      </div>
      {generatorOpen && <GeneratorPanel app={app} onClose={() => setGeneratorOpen(false)} />}
      {fieldError(list.error, 'query.q') && <div className="field-error" role="alert">{fieldError(list.error, 'query.q')}</div>}

      {selected.length > 0 && actions.length > 0 && (
        <div className="bulk-bar" role="region" aria-label="Bulk actions">
          <span>{selected.length} selected</span>
          {actions.map((a) => (
            <Button key={a} variant={a === 'delete' ? 'danger' : 'plain'} disabled={progress !== null} onClick={() => start(a, selected)}>
              {ACTION_LABEL[a]} selected
            </Button>
          ))}
          <Button variant="ghost" onClick={() => setSelection({})}>Clear selection</Button>
        </div>
      )}
      {progress && (
        <div className="progress-line" role="status" aria-live="polite">
          <progress max={progress.total} value={progress.done} aria-label={progress.label} /> {progress.label}: {progress.done} of {progress.total}
        </div>
      )}
      {result && <BulkReport label={result.label} result={result.result} onClose={() => setResult(null)} />}

      {list.isPending && <Loading label="Loading keys" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && (
        <DataTable
          caption="License keys"
          testId="licenses-table"
          data={rows}
          columns={columns}
          rowId={(r) => r.id}
          rowLabel={(r) => r.key_preview}
          {...(actions.length > 0 ? { selection, onSelection: setSelection } : {})}
          empty={status || q ? 'No key matches these filters.' : can(caller, 'generate_keys') ? 'No keys yet. Generate some above.' : 'No keys yet.'}
        />
      )}
      {list.hasNextPage && (
        <div className="actions">
          <Button onClick={() => void list.fetchNextPage()} busy={list.isFetchingNextPage} busyLabel="Loading more">Load more</Button>
        </div>
      )}

      <ExtendDialog pending={pending?.action === 'extend' ? pending.rows : null} onClose={() => setPending(null)}
        onSubmit={(v) => void run('extend', pending!.rows, v)} busy={progress !== null} />
      <Confirm
        open={pending !== null && pending.action !== 'extend'}
        title={pending ? `${ACTION_LABEL[pending.action]} ${pending.rows.length === 1 ? 'this key' : `${pending.rows.length} keys`}?` : ''}
        message={pending?.action === 'delete' ? 'Deleted keys are gone for good; a bound user is refused at its next request.' : 'One request is sent per key; you will see how many succeeded and failed.'}
        confirmLabel={pending ? `${ACTION_LABEL[pending.action]}${pending.rows.length > 1 ? ` ${pending.rows.length} keys` : ''}` : ''}
        busy={progress !== null}
        onConfirm={() => pending && void run(pending.action, pending.rows)}
        onClose={() => setPending(null)}
      />
      <ExtendAllDialog app={app} open={extendAllOpen} onClose={() => setExtendAllOpen(false)} />
    </div>
  );
}

function BulkReport({ label, result, onClose }: { label: string; result: BulkResult<License>; onClose: () => void }) {
  const failed = result.failed.length;
  return (
    <div className={`alert ${failed ? 'alert-warn' : 'alert-ok'}`} role="status" data-testid="bulk-report">
      <div>
        <strong>{label}:</strong> {result.succeeded} succeeded, {failed} failed.
        {failed > 0 && (
          <ul>
            {result.failed.map((f) => <li key={f.item.id}><code>{f.item.key_preview}</code>: {f.detail}</li>)}
          </ul>
        )}
      </div>
      <Button variant="ghost" onClick={onClose} aria-label="Dismiss">✕</Button>
    </div>
  );
}

function ExtendDialog({ pending, onClose, onSubmit, busy }: {
  pending: License[] | null; onClose: () => void; onSubmit: (v: { value: number; unit: string; subtract: boolean }) => void; busy: boolean;
}) {
  const [value, setValue] = useState('7');
  const [unit, setUnit] = useState('days');
  const [subtract, setSubtract] = useState(false);
  return (
    <Dialog open={pending !== null} title={pending && pending.length === 1 ? `Extend ${pending[0]!.key_preview}` : `Extend ${pending?.length ?? 0} keys`} onClose={onClose}>
      <form noValidate onSubmit={(e) => { e.preventDefault(); onSubmit({ value: Number(value), unit, subtract }); }}>
        <div className="field-pair">
          <Field label="Amount of time">{(p) => <input {...p} type="number" inputMode="numeric" value={value} onChange={(e) => setValue(e.target.value)} autoFocus />}</Field>
          <Field label="Unit">{(p) => <select {...p} value={unit} onChange={(e) => setUnit(e.target.value)}>{['hours', 'days', 'weeks', 'months'].map((u) => <option key={u}>{u}</option>)}</select>}</Field>
        </div>
        <label className="check"><input type="checkbox" checked={subtract} onChange={(e) => setSubtract(e.target.checked)} /> Subtract instead of adding</label>
        <p className="muted small">Lifetime and never-activated keys cannot be extended; they are reported as failed.</p>
        <div className="actions">
          <Button onClick={onClose}>Cancel</Button>
          <Button type="submit" variant="primary" busy={busy} busyLabel="Extending">{subtract ? 'Subtract' : 'Extend'}</Button>
        </div>
      </form>
    </Dialog>
  );
}

function ExtendAllDialog({ app, open, onClose }: { app: App; open: boolean; onClose: () => void }) {
  const qc = useQueryClient();
  const [value, setValue] = useState('7');
  const [unit, setUnit] = useState('days');
  const m = useMutation({
    mutationFn: () => licensesApi.extendAll(app.id, { value: Number(value), unit: unit as 'days' }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['licenses', app.id] });
    },
  });
  useEffect(() => {
    if (!open) m.reset();
  }, [open]); // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <Dialog open={open} title="Extend every active key" onClose={onClose}>
      <form noValidate onSubmit={(e) => { e.preventDefault(); m.mutate(); }}>
        <div className="field-pair">
          <Field label="Amount of time" error={fieldError(m.error, 'value')}>{(p) => <input {...p} type="number" inputMode="numeric" value={value} onChange={(e) => setValue(e.target.value)} autoFocus />}</Field>
          <Field label="Unit" error={fieldError(m.error, 'unit')}>{(p) => <select {...p} value={unit} onChange={(e) => setUnit(e.target.value)}>{['hours', 'days', 'weeks', 'months'].map((u) => <option key={u}>{u}</option>)}</select>}</Field>
        </div>
        <p className="muted small">Unused and lifetime keys are skipped.</p>
        <FormError error={m.error} fields={['value', 'unit']} />
        {m.data && <div className="alert alert-ok" role="status">{m.data.extended} extended, {m.data.skipped} skipped.</div>}
        <div className="actions">
          <Button onClick={onClose}>{m.data ? 'Close' : 'Cancel'}</Button>
          {!m.data && <Button type="submit" variant="primary" busy={m.isPending} busyLabel="Extending">Extend all</Button>}
        </div>
      </form>
    </Dialog>
  );
}
