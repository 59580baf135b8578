// End users (the 2000 newest, SPEC Limits): reset HWID, freeze/unfreeze, delete, with the fields
// the caller may see. Hidden fields are absent from the answer; their columns simply are not shown.
import { useMemo, useState } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import type { ColumnDef } from '@tanstack/react-table';
import { users as usersApi } from '../api/endpoints.js';
import type { App, EndUser } from '../api/responses.js';
import { DataTable } from '../components/DataTable.js';
import { Badge, Button, Confirm, ErrorState, Loading, Time } from '../components/ui.js';
import { can } from '../lib/permissions.js';
import { useSession } from '../session.js';
import { useNotice } from '../notices.js';

export function UsersTab({ app }: { app: App }) {
  const { caller } = useSession();
  const qc = useQueryClient();
  const notice = useNotice();
  const [filter, setFilter] = useState('');
  const [busy, setBusy] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<EndUser | null>(null);
  const list = useQuery({ queryKey: ['users', app.id], queryFn: () => usersApi.list(app.id) });

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

  const rows = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return (list.data ?? []).filter((u) => !f || u.username.toLowerCase().includes(f));
  }, [list.data, filter]);
  const showHwid = rows.some((u) => u.hwid !== undefined);
  const showIp = rows.some((u) => u.ip !== undefined);

  const columns = useMemo<ColumnDef<EndUser, any>[]>(() => [
    { id: 'username', header: 'Username', cell: ({ row }) => <strong>{row.original.username}</strong> },
    { id: 'state', header: 'State', cell: ({ row }) => (row.original.banned ? <Badge tone="red">frozen</Badge> : <Badge tone="green">active</Badge>) },
    { id: 'level', header: 'Level', cell: ({ row }) => row.original.level },
    { id: 'created', header: 'Registered', cell: ({ row }) => <Time iso={row.original.created_at} /> },
    { id: 'last_login', header: 'Last login', cell: ({ row }) => <Time iso={row.original.last_login} empty="never" /> },
    { id: 'expires', header: 'Expires', cell: ({ row }) => <Time iso={row.original.expires_at} empty="never" /> },
    ...(showHwid ? [{ id: 'hwid', header: 'HWID', cell: ({ row }: { row: { original: EndUser } }) => <code className="mono small">{row.original.hwid || '—'}</code> }] : []),
    ...(showIp ? [
      { id: 'ip', header: 'IP', cell: ({ row }: { row: { original: EndUser } }) => row.original.ip || '—' },
      { id: 'countries', header: 'Countries', cell: ({ row }: { row: { original: EndUser } }) => (row.original.known_countries ?? []).join(', ') || '—' },
    ] : []),
    {
      id: 'actions', header: 'Actions', cell: ({ row }) => {
        const u = row.original;
        return (
          <span className="row-actions">
            {can(caller, 'reset_hwid') && (
              <Button variant="ghost" className="small" busy={busy === `reset:${u.id}`} aria-label={`Reset HWID of ${u.username}`}
                onClick={() => void act(`reset:${u.id}`, `HWID of ${u.username} reset`, () => usersApi.resetHwid(u.id))}>Reset HWID</Button>
            )}
            {can(caller, 'freeze_unfreeze') && (
              <Button variant="ghost" className="small" busy={busy === `ban:${u.id}`} aria-label={`${u.banned ? 'Unfreeze' : 'Freeze'} ${u.username}`}
                onClick={() => void act(`ban:${u.id}`, `${u.username} ${u.banned ? 'unfrozen' : 'frozen'}`, () => usersApi.setBanned(u.id, !u.banned))}>
                {u.banned ? 'Unfreeze' : 'Freeze'}
              </Button>
            )}
            {can(caller, 'delete_keys') && (
              <Button variant="danger" className="small" aria-label={`Delete ${u.username}`} onClick={() => setDeleting(u)}>Delete</Button>
            )}
          </span>
        );
      },
    },
  ], [showHwid, showIp, busy, caller]); // eslint-disable-line react-hooks/exhaustive-deps

  return (
    <div>
      <div className="toolbar">
        <label className="inline-field grow">
          <span>Filter</span>
          <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="Username" />
        </label>
        {list.data && <span className="muted">{list.data.length === 2000 ? 'The 2000 newest users' : `${list.data.length} user${list.data.length === 1 ? '' : 's'}`}</span>}
      </div>
      {list.isPending && <Loading label="Loading users" />}
      {list.isError && <ErrorState error={list.error} retry={() => void list.refetch()} />}
      {list.data && (
        <DataTable caption="End users" testId="users-table" data={rows} columns={columns} rowId={(u) => u.id}
          empty={filter ? 'No user matches.' : 'No users yet: they appear when a client registers with a key.'} />
      )}
      <Confirm
        open={deleting !== null}
        title={`Delete ${deleting?.username ?? ''}?`}
        message="The user is removed; its key stays used and can be registered again."
        confirmLabel="Delete user"
        busy={busy === `delete:${deleting?.id}`}
        onConfirm={() => deleting && void act(`delete:${deleting.id}`, `${deleting.username} deleted`, () => usersApi.remove(deleting.id))}
        onClose={() => setDeleting(null)}
      />
    </div>
  );
}
