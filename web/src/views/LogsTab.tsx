// The audit log: Time, Action, Actor, Detail, IP, Location, Screen (the server leaves out what the
// caller may not see) in a windowed table that fetches older entries as they scroll into view, and
// filters by level, action and actor. The Actor is who made a dashboard change (and "via token" when
// an API token did); client calls have none. A live event refreshes the pages on screen only.
import { useCallback, useMemo, useState } from 'react';
import { apps as appsApi } from '../api/endpoints.js';
import type { App, LogEntry } from '../api/responses.js';
import { DataTable, type Column } from '../components/DataTable.js';
import { Badge, Button, ErrorState, Loading, Time } from '../components/ui.js';
import { usePagedList } from '../hooks/usePagedList.js';

const PAGE = 100;
const LEVELS = [
  ['', 'All levels'],
  ['info', 'Info'],
  ['warning', 'Warning'],
  ['error', 'Error'],
] as const;

function ActorCell({ actor }: { actor: LogEntry['actor'] }) {
  if (!actor) return <span className="muted">—</span>;
  return (
    <>
      {actor.username ?? actor.id.slice(0, 8)}
      {actor.token_id && (
        <>
          {' '}
          <Badge tone="blue">via token</Badge>
        </>
      )}
    </>
  );
}

export function LogsTab({ app }: { app: App }) {
  const [level, setLevel] = useState('');
  // The applied filters, and what the filter form says now (applied on submit, so typing does not
  // fetch on every key). from/to are dates (YYYY-MM-DD): the whole of each day, in UTC.
  const [applied, setApplied] = useState({ action: '', actor: '', q: '', from: '', to: '' });
  const [draft, setDraft] = useState(applied);
  const { action, actor, q } = applied;
  const from = applied.from ? `${applied.from}T00:00:00Z` : '';
  const to = applied.to ? `${applied.to}T23:59:59.999Z` : '';
  // The listing pages with `before` (the last id of the previous page) and returns a plain array:
  // a full page means there may be more.
  const fetchPage = useCallback(
    async (before: string) => {
      const items = await appsApi.logs(app.id, {
        limit: PAGE,
        ...(level ? { level: level as 'info' } : {}),
        ...(action ? { action } : {}),
        ...(actor ? { actor } : {}),
        ...(q ? { q } : {}),
        ...(from ? { from } : {}),
        ...(to ? { to } : {}),
        ...(before ? { before } : {}),
      });
      return { items, next: items.length === PAGE ? items[items.length - 1]!.id : null };
    },
    [app.id, level, action, actor, q, from, to],
  );
  const list = usePagedList<LogEntry>({
    queryKey: ['logs', app.id, level, action, actor, q, from, to],
    pageSize: PAGE,
    fetchPage,
  });
  const filtered = level !== '' || action !== '' || actor !== '' || q !== '' || from !== '' || to !== '';
  const sample = list.rowAt(0);
  const showIp = sample?.ip !== undefined;
  const showScreen = sample?.screen !== undefined;
  const columns = useMemo<Column<LogEntry>[]>(
    () => [
      { id: 'time', header: 'Time', cell: (r) => <Time iso={r.time} /> },
      {
        id: 'action',
        header: 'Action',
        title: (r) => r.action,
        cell: (r) => (
          <>
            {r.level !== 'info' && <Badge tone={r.level === 'error' ? 'red' : 'amber'}>{r.level}</Badge>}{' '}
            <code>{r.action}</code>
          </>
        ),
      },
      {
        id: 'actor',
        header: 'Actor',
        title: (r) => (r.actor ? `${r.actor.username ?? r.actor.id} (${r.actor.role ?? 'unknown role'})` : undefined),
        cell: (r) => <ActorCell actor={r.actor} />,
      },
      { id: 'detail', header: 'Detail', title: (r) => r.detail, cell: (r) => r.detail },
      ...(showIp
        ? [
            { id: 'ip', header: 'IP', title: (r: LogEntry) => r.ip || undefined, cell: (r: LogEntry) => r.ip || '—' },
            {
              id: 'location',
              header: 'Location',
              title: (r: LogEntry) => r.location || undefined,
              cell: (r: LogEntry) => r.location || '—',
            },
          ]
        : []),
      ...(showScreen
        ? [
            {
              id: 'screen',
              header: 'Screen',
              title: (r: LogEntry) => r.screen || undefined,
              cell: (r: LogEntry) => (r.screen ? '📷 captured' : '—'),
            },
          ]
        : []),
    ],
    [showIp, showScreen],
  );

  return (
    <div>
      <form
        className="toolbar"
        aria-label="Filter the log"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied({ ...draft, action: draft.action.trim(), actor: draft.actor.trim(), q: draft.q.trim() });
        }}
      >
        <label className="inline-field">
          <span>Level</span>
          <select name="level" value={level} onChange={(e) => setLevel(e.target.value)}>
            {LEVELS.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </label>
        <label className="inline-field">
          <span>Action</span>
          <input
            name="action"
            value={draft.action}
            placeholder="e.g. license.ban"
            maxLength={64}
            onChange={(e) => setDraft({ ...draft, action: e.target.value })}
          />
        </label>
        <label className="inline-field">
          <span>Actor</span>
          <input
            name="actor"
            value={draft.actor}
            placeholder="username"
            maxLength={32}
            onChange={(e) => setDraft({ ...draft, actor: e.target.value })}
          />
        </label>
        <label className="inline-field">
          <span>Text</span>
          <input
            name="q"
            type="search"
            value={draft.q}
            placeholder="detail or actor"
            maxLength={200}
            onChange={(e) => setDraft({ ...draft, q: e.target.value })}
          />
        </label>
        <label className="inline-field">
          <span>From</span>
          <input
            name="from"
            type="date"
            value={draft.from}
            onChange={(e) => setDraft({ ...draft, from: e.target.value })}
          />
        </label>
        <label className="inline-field">
          <span>To</span>
          <input name="to" type="date" value={draft.to} onChange={(e) => setDraft({ ...draft, to: e.target.value })} />
        </label>
        <Button type="submit">Filter</Button>
        <a
          className="btn btn-plain"
          href={appsApi.exportUrl(app.id, 'logs', { level, action, actor, q, from, to })}
          download
        >
          Export CSV
        </a>
        <span className="muted small">Newest first; older entries load as you scroll.</span>
      </form>
      {list.isPending && <Loading label="Loading logs" />}
      {list.error !== null && <ErrorState error={list.error} retry={list.retry} />}
      {!list.isPending && (list.rows > 0 || list.complete) && (
        <DataTable
          caption="Audit log"
          testId="logs-table"
          className="logs-table"
          columns={columns}
          count={list.count}
          rowAt={list.rowAt}
          rowId={(r) => r.id}
          onRange={list.setRange}
          resetKey={`${level}|${action}|${actor}`}
          loading={<span className="muted">Loading older entries…</span>}
          empty={
            filtered
              ? 'No entry matches these filters.'
              : 'No log entries yet: client calls, key and user changes are recorded here.'
          }
        />
      )}
      {showIp && (
        <p className="muted small">
          <a href="https://db-ip.com" target="_blank" rel="noreferrer">
            IP Geolocation by DB-IP
          </a>
        </p>
      )}
    </div>
  );
}
