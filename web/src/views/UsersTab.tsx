// End users (the 2000 newest, docs/spec.md "Limits") in a windowed table: reset HWID, freeze/unfreeze, delete
// from each row's menu, with the fields the caller may see. Hidden fields are absent from the answer;
// their columns simply are not shown. The filter is the browser's over the loaded users until the
// server searches users itself.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { apps as appsApi, users as usersApi } from '../api/endpoints.js';
import type { App, EndUser } from '../api/responses.js';
import { DataTable, type Column } from '../components/DataTable.js';
import { MenuButton, RowMenu, useRowMenu } from '../components/RowMenu.js';
import { Badge, Confirm, ErrorState, Loading, Time } from '../components/ui.js';
import { formatCount, plural } from '../lib/plural.js';
import { can } from '../lib/permissions.js';
import { useSession } from '../session.js';
import { usePagedList } from '../hooks/usePagedList.js';
import { useNotice } from '../notices.js';

/** What GET /api/apps/{id}/users returns at most (docs/spec.md "Limits"). */
const PAGE = 100;

/** `value`, once it has stayed the same for `ms` (a search sent when typing pauses). */
function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

export function UsersTab({ app }: { app: App }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [filter, setFilter] = useState('');
  const [busy, setBusy] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<EndUser | null>(null);
  const q = useDebounced(filter.trim(), 300);
  // Cursor pages searched on the server, fetched as they scroll into view (like Licenses).
  const fetchPage = useCallback(
    async (cursor: string) => {
      const page = await usersApi.page(app.id, { limit: PAGE, ...(q ? { q } : {}), ...(cursor ? { cursor } : {}) });
      return { items: page.items, next: page.next_cursor };
    },
    [app.id, q],
  );
  const list = usePagedList<EndUser>({ queryKey: ['users', app.id, q], pageSize: PAGE, fetchPage });

  const act = async (key: string, label: string, fn: () => Promise<unknown>) => {
    setBusy(key);
    try {
      await fn();
      notice('ok', label);
      setDeleting(null);
    } catch (err) {
      notice('error', err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(null);
      void qc.invalidateQueries({ queryKey: ['users', app.id] });
      void qc.invalidateQueries({ queryKey: ['stats', app.id] });
    }
  };

  const sample = list.rowAt(0);
  const showHwid = sample?.hwid !== undefined;
  const showIp = sample?.ip !== undefined;

  // Rows and their menu keep their identity while `busy` changes; the menu reads it when opened.
  const menu = useRowMenu();
  const live = useRef({ act, busy });
  live.current = { act, busy };
  const openMenu = useCallback(
    (u: EndUser, anchor: HTMLElement) =>
      menu.open({
        anchor,
        label: `Actions for ${u.username}`,
        items: [
          ...(can(caller, 'reset_hwid')
            ? [
                {
                  label: 'Reset HWID',
                  disabled: live.current.busy !== null,
                  onSelect: () =>
                    void live.current.act(`reset:${u.id}`, `HWID of ${u.username} reset`, () =>
                      usersApi.resetHwid(u.id),
                    ),
                },
              ]
            : []),
          // docs/protocol.md 12.1: one machine off the account, freeing its place.
          ...(can(caller, 'reset_hwid')
            ? (u.devices ?? []).map((d) => ({
                label: `Remove device ${d.hwid}`,
                disabled: live.current.busy !== null,
                onSelect: () =>
                  void live.current.act(`device:${u.id}`, `Device of ${u.username} removed`, () =>
                    usersApi.removeDevice(u.id, d.hwid),
                  ),
              }))
            : []),
          ...(can(caller, 'freeze_unfreeze')
            ? [
                {
                  label: u.banned ? 'Unfreeze' : 'Freeze',
                  disabled: live.current.busy !== null,
                  onSelect: () =>
                    void live.current.act(`ban:${u.id}`, `${u.username} ${u.banned ? 'unfrozen' : 'frozen'}`, () =>
                      usersApi.setBanned(u.id, !u.banned),
                    ),
                },
              ]
            : []),
          ...(can(caller, 'delete_keys') ? [{ label: 'Delete', danger: true, onSelect: () => setDeleting(u) }] : []),
        ],
      }),
    [caller, menu.open],
  );
  const hasActions = can(caller, 'reset_hwid') || can(caller, 'freeze_unfreeze') || can(caller, 'delete_keys');

  const columns = useMemo<Column<EndUser>[]>(
    () => [
      { id: 'username', header: 'Username', title: (u) => u.username, cell: (u) => <strong>{u.username}</strong> },
      {
        id: 'key',
        header: 'Key',
        title: (u) => u.key_preview ?? '',
        cell: (u) =>
          u.key_preview ? <code className="mono">{u.key_preview}</code> : <span className="muted">none</span>,
      },
      {
        id: 'state',
        header: 'State',
        cell: (u) => (u.banned ? <Badge tone="red">frozen</Badge> : <Badge tone="green">active</Badge>),
      },
      { id: 'level', header: 'Level', cell: (u) => u.level },
      { id: 'created', header: 'Registered', cell: (u) => <Time iso={u.created_at} /> },
      { id: 'last_login', header: 'Last login', cell: (u) => <Time iso={u.last_login} empty="never" /> },
      { id: 'expires', header: 'Expires', cell: (u) => <Time iso={u.expires_at} empty="never" /> },
      ...(showHwid
        ? [
            {
              id: 'hwid',
              header: 'HWID',
              title: (u: EndUser) => u.hwid || undefined,
              cell: (u: EndUser) => <code className="mono small">{u.hwid || '—'}</code>,
            },
            {
              id: 'devices',
              header: 'Devices',
              title: (u: EndUser) => (u.devices ?? []).map((d) => d.hwid).join('\n') || undefined,
              cell: (u: EndUser) => (u.devices ?? []).length,
            },
          ]
        : []),
      ...(showIp
        ? [
            { id: 'ip', header: 'IP', cell: (u: EndUser) => u.ip || '—' },
            {
              id: 'countries',
              header: 'Countries',
              title: (u: EndUser) => (u.known_countries ?? []).join(', ') || undefined,
              cell: (u: EndUser) => (u.known_countries ?? []).join(', ') || '—',
            },
          ]
        : []),
      ...(hasActions
        ? [
            {
              id: 'actions',
              header: <span className="sr-only">Actions</span>,
              cell: (u: EndUser) => <MenuButton label={`Actions for ${u.username}`} onOpen={(el) => openMenu(u, el)} />,
            },
          ]
        : []),
    ],
    [showHwid, showIp, hasActions, openMenu],
  );

  return (
    <div>
      <div className="toolbar">
        <label className="inline-field grow">
          <span>Filter</span>
          <input
            type="search"
            value={filter}
            onChange={(e) => setFilter(e.target.value)}
            placeholder="Username, key preview or full key"
          />
        </label>
        <a className="btn btn-plain" href={appsApi.exportUrl(app.id, 'users', { q: q || undefined })} download>
          Export CSV
        </a>
        {!list.isPending && (
          <span className="muted" data-testid="users-count">
            {list.complete ? plural(list.rows, 'user') : `${formatCount(list.rows)}+ users`}
            {q ? ' match' : ''}
          </span>
        )}
      </div>
      {list.isPending && <Loading label="Loading users" />}
      {list.error !== null && <ErrorState error={list.error} retry={list.retry} />}
      {!list.isPending && (list.rows > 0 || list.complete) && (
        <DataTable
          caption="End users"
          testId="users-table"
          className="users-table"
          columns={columns}
          count={list.count}
          rowAt={list.rowAt}
          onRange={list.setRange}
          loading={<span className="muted">Loading more users…</span>}
          rowId={(u) => u.id}
          resetKey={q}
          empty={q ? 'No user matches.' : 'No users yet: they appear when a client registers with a key.'}
        />
      )}
      <RowMenu menu={menu.menu} onClose={menu.close} />
      <Confirm
        open={deleting !== null}
        title={`Delete ${deleting?.username ?? ''}?`}
        message="The user is removed; its key stays used and can be registered again."
        confirmLabel="Delete user"
        busy={busy === `delete:${deleting?.id}`}
        onConfirm={() =>
          deleting &&
          void act(`delete:${deleting.id}`, `${deleting.username} deleted`, () => usersApi.remove(deleting.id))
        }
        onClose={() => setDeleting(null)}
      />
    </div>
  );
}
