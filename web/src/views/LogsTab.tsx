// The audit log: Time, Action, Detail, IP, Location, Screen (the server leaves out what the caller
// may not see) in a windowed table that fetches older entries as they scroll into view, and a
// level filter. A live event refreshes the pages on screen only.
import { useCallback, useMemo, useState } from 'react';
import { apps as appsApi } from '../api/endpoints.js';
import type { App, LogEntry } from '../api/responses.js';
import { DataTable, type Column } from '../components/DataTable.js';
import { Badge, ErrorState, Loading, Time } from '../components/ui.js';
import { usePagedList } from '../hooks/usePagedList.js';

const PAGE = 100;
const LEVELS = [['', 'All levels'], ['info', 'Info'], ['warning', 'Warning'], ['error', 'Error']] as const;

export function LogsTab({ app }: { app: App }) {
  const [level, setLevel] = useState('');
  // The listing pages with `before` (the last id of the previous page) and returns a plain array:
  // a full page means there may be more.
  const fetchPage = useCallback(async (before: string) => {
    const items = await appsApi.logs(app.id, { limit: PAGE, ...(level ? { level: level as 'info' } : {}), ...(before ? { before } : {}) });
    return { items, next: items.length === PAGE ? items[items.length - 1]!.id : null };
  }, [app.id, level]);
  const list = usePagedList<LogEntry>({ queryKey: ['logs', app.id, level], pageSize: PAGE, fetchPage });
  const sample = list.rowAt(0);
  const showIp = sample?.ip !== undefined;
  const showScreen = sample?.screen !== undefined;
  const columns = useMemo<Column<LogEntry>[]>(() => [
    { id: 'time', header: 'Time', cell: (r) => <Time iso={r.time} /> },
    {
      id: 'action', header: 'Action', title: (r) => r.action, cell: (r) => (
        <>{r.level !== 'info' && <Badge tone={r.level === 'error' ? 'red' : 'amber'}>{r.level}</Badge>} <code>{r.action}</code></>
      ),
    },
    { id: 'detail', header: 'Detail', title: (r) => r.detail, cell: (r) => r.detail },
    ...(showIp ? [
      { id: 'ip', header: 'IP', title: (r: LogEntry) => r.ip || undefined, cell: (r: LogEntry) => r.ip || '—' },
      { id: 'location', header: 'Location', title: (r: LogEntry) => r.location || undefined, cell: (r: LogEntry) => r.location || '—' },
    ] : []),
    ...(showScreen ? [{ id: 'screen', header: 'Screen', title: (r: LogEntry) => r.screen || undefined, cell: (r: LogEntry) => (r.screen ? '📷 captured' : '—') }] : []),
  ], [showIp, showScreen]);

  return (
    <div>
      <div className="toolbar">
        <label className="inline-field">
          <span>Level</span>
          <select name="level" value={level} onChange={(e) => setLevel(e.target.value)}>
            {LEVELS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
          </select>
        </label>
        <span className="muted small">Newest first; older entries load as you scroll.</span>
      </div>
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
          resetKey={level}
          loading={<span className="muted">Loading older entries…</span>}
          empty={level ? 'No entry at this level.' : 'No log entries yet: client calls, key and user changes are recorded here.'}
        />
      )}
      {showIp && <p className="muted small"><a href="https://db-ip.com" target="_blank" rel="noreferrer">IP Geolocation by DB-IP</a></p>}
    </div>
  );
}
