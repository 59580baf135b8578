// The audit log: Time, Action, Detail, IP, Location, Screen (the server leaves out what the caller
// may not see), a level filter and paging towards older entries.
import { useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { apps as appsApi } from '../api/endpoints.js';
import type { App, LogEntry } from '../api/responses.js';
import { Badge, Button, EmptyState, ErrorState, Loading, Time } from '../components/ui.js';

const PAGE = 50;
const LEVELS = [['', 'All levels'], ['info', 'Info'], ['warning', 'Warning'], ['error', 'Error']] as const;

export function LogsTab({ app }: { app: App }) {
  const [level, setLevel] = useState('');
  // `before` of each page after the first; the first page (newest) follows live updates.
  const [cursors, setCursors] = useState<string[]>([]);
  const before = cursors[cursors.length - 1];
  const list = useQuery({
    queryKey: ['logs', app.id, level, before ?? ''],
    queryFn: () => appsApi.logs(app.id, { limit: PAGE, ...(level ? { level: level as 'info' } : {}), ...(before ? { before } : {}) }),
    placeholderData: (prev) => prev,
  });
  const rows: LogEntry[] = list.data ?? [];
  const showIp = rows.some((r) => r.ip !== undefined);
  const showScreen = rows.some((r) => r.screen !== undefined);
  return (
    <div>
      <div className="toolbar">
        <label className="inline-field">
          <span>Level</span>
          <select name="level" value={level} onChange={(e) => { setLevel(e.target.value); setCursors([]); }}>
            {LEVELS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
          </select>
        </label>
        <span className="muted">{cursors.length === 0 ? 'Newest entries' : `Page ${cursors.length + 1}`}</span>
      </div>
      {list.isPending && <Loading label="Loading logs" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && rows.length === 0 && <EmptyState title={cursors.length ? 'No older entries' : 'No log entries yet'}>Client calls, key and user changes are recorded here.</EmptyState>}
      {rows.length > 0 && (
        <div className="table-wrap" role="region" aria-label="Audit log" tabIndex={0} data-testid="logs-table">
          <table className="table">
            <caption className="sr-only">Audit log</caption>
            <thead>
              <tr>
                <th scope="col">Time</th><th scope="col">Action</th><th scope="col">Detail</th>
                {showIp && <><th scope="col">IP</th><th scope="col">Location</th></>}
                {showScreen && <th scope="col">Screen</th>}
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.id} data-row-id={r.id}>
                  <td className="nowrap"><Time iso={r.time} /></td>
                  <td><span className="nowrap">{r.level !== 'info' && <Badge tone={r.level === 'error' ? 'red' : 'amber'}>{r.level}</Badge>} <code>{r.action}</code></span></td>
                  <td className="detail">{r.detail}</td>
                  {showIp && <><td className="nowrap">{r.ip || '—'}</td><td>{r.location || '—'}</td></>}
                  {showScreen && <td>{r.screen ? <span title={r.screen}>📷 captured</span> : '—'}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="actions">
        {cursors.length > 0 && <Button onClick={() => setCursors(cursors.slice(0, -1))}>Newer</Button>}
        {rows.length === PAGE && <Button busy={list.isFetching} busyLabel="Loading" onClick={() => setCursors([...cursors, rows[rows.length - 1]!.id])}>Older</Button>}
      </div>
      {showIp && <p className="muted small"><a href="https://db-ip.com" target="_blank" rel="noreferrer">IP Geolocation by DB-IP</a></p>}
    </div>
  );
}
