// The Licenses table's columns (a key's devices under its HWID, its entitlement codes under its note)
// and what each row's actions menu offers. Widths live in the
// stylesheet (.licenses-table .col-*), chosen so the table fits a 1280-wide window with every column.
import type { License } from '../api/responses.js';
import type { Column } from '../components/DataTable.js';
import { MenuButton } from '../components/RowMenu.js';
import { Badge, Time } from '../components/ui.js';
import { devicesLabel, entitlementChips } from '../lib/key-row.js';
import { activatedAt, durationLabel } from '../lib/time.js';

export type Action = 'extend' | 'reset' | 'ban' | 'unban' | 'delete';
export const ACTION_LABEL: Record<Action, string> = {
  extend: 'Extend',
  reset: 'Reset HWID',
  ban: 'Ban',
  unban: 'Unban',
  delete: 'Delete',
};

/** Row actions only for what can apply to that key (bulk actions try every selected row and report failures). */
export function rowOffers(k: License, a: Action): boolean {
  switch (a) {
    case 'extend':
      return k.status === 'used' && k.duration_unit !== 'lifetime' && k.expires_at !== null;
    case 'reset':
      return k.hwid === undefined || (k.hwid ?? '') !== '';
    case 'ban':
      return k.status !== 'banned';
    case 'unban':
      return k.status === 'banned';
    case 'delete':
      return true;
  }
}

export function statusTone(s: string): 'green' | 'red' | 'grey' | 'amber' {
  return s === 'active' ? 'green' : s === 'banned' ? 'red' : s === 'expired' ? 'amber' : 'grey';
}

/** Who created a key, as the Licenses table shows it. */
export interface Creator {
  label: string;
  title: string;
}

/**
 * Names a key's `created_by` (an account id) from the accounts the caller knows: itself, its team
 * (GET /api/team, owners, admins and developers), and its owner. An account it cannot name (a deleted
 * member, one outside its view) shows a short id; no creator means an order or a trial made the key.
 */
export function creatorOf(
  createdBy: string | null,
  me: { id: string; username: string; display_name: string | null; owner_id: string | null },
  team: readonly { id: string; username: string; display_name: string | null }[] | undefined,
): Creator {
  if (createdBy === null) return { label: '—', title: 'Not created by a member: an order or a trial' };
  if (createdBy === me.id) return { label: me.display_name || me.username, title: 'You' };
  const member = team?.find((a) => a.id === createdBy);
  if (member) return { label: member.display_name || member.username, title: member.username };
  if (createdBy === me.owner_id) return { label: 'Owner', title: 'The owner of this dashboard' };
  return { label: `${createdBy.slice(0, 8)}…`, title: `Account ${createdBy}` };
}

function EntitlementChips({ codes }: { codes: readonly string[] }) {
  const { shown, more } = entitlementChips(codes);
  if (codes.length === 0) return null;
  return (
    <span className="chips" data-testid="entitlements">
      {shown.map((c) => (
        <span key={c} className="chip">
          {c}
        </span>
      ))}
      {more > 0 && <span className="chip chip-more">+{more}</span>}
    </span>
  );
}

export function licenseColumns({
  hwid,
  actions,
  openMenu,
  creator,
  app,
}: {
  hwid: boolean;
  actions: boolean;
  openMenu: (row: License, anchor: HTMLElement) => void;
  creator: (k: License) => Creator;
  /** The application's device limit and lock, for a key without a limit of its own. */
  app: { max_devices: number; hwid_lock: boolean };
}): Column<License>[] {
  return [
    { id: 'key', header: 'Key', cell: (k) => <code className="mono">{k.key_preview}</code> },
    {
      // The stored status says something the computed one does not only while an activation is pending.
      id: 'status',
      header: 'Status',
      title: (k) => `Stored status: ${k.status}`,
      cell: (k) => (
        <span className="status-cell">
          <Badge tone={statusTone(k.computed_status)}>{k.computed_status}</Badge>
          {k.status === 'pending' && <span className="muted small">pending</span>}
        </span>
      ),
    },
    {
      id: 'used_by',
      header: 'Used by',
      title: (k) => k.used_by || undefined,
      cell: (k) => k.used_by || <span className="muted">—</span>,
    },
    { id: 'level', header: 'Level', cell: (k) => k.level },
    { id: 'duration', header: 'Duration', cell: (k) => durationLabel(k.duration_value, k.duration_unit) },
    {
      // Who created the key sits under the time, so the table keeps its width (1280 px fits every column).
      id: 'created',
      header: 'Created / by',
      title: (k) => `Created by: ${creator(k).title}`,
      cell: (k) => (
        <span className="created-cell">
          <Time iso={k.created_at} />
          <span className="created-by" data-testid="created-by">
            {creator(k).label}
          </span>
        </span>
      ),
    },
    {
      id: 'activated',
      header: 'Activated',
      cell: (k) => <Time iso={activatedAt(k)} empty={k.status === 'used' ? '—' : 'not yet'} />,
    },
    {
      id: 'expires',
      header: 'Expires',
      cell: (k) => (k.duration_unit === 'lifetime' ? 'Never' : <Time iso={k.expires_at} empty="on activation" />),
    },
    ...(hwid
      ? [
          {
            // The first device's HWID, and under it how many devices the key holds of its limit.
            id: 'hwid',
            header: 'HWID',
            title: (k: License) => [k.hwid, devicesLabel(k, app)?.title].filter(Boolean).join('\n') || undefined,
            cell: (k: License) => {
              const d = devicesLabel(k, app);
              return (
                <span className="stacked-cell">
                  <code className="mono small">{k.hwid || '—'}</code>
                  {d && (
                    <span className="stacked-sub" data-testid="devices">
                      {d.label}
                    </span>
                  )}
                </span>
              );
            },
          },
        ]
      : []),
    {
      id: 'sessions',
      header: 'Sessions',
      title: (k) =>
        k.max_sessions == null
          ? 'Live sessions (limit: the application’s)'
          : `Live sessions of at most ${k.max_sessions}`,
      cell: (k) => (
        <span data-testid="live-sessions">
          {k.live_sessions ?? 0}
          {k.max_sessions != null && k.max_sessions > 0 ? ` / ${k.max_sessions}` : ''}
        </span>
      ),
    },
    {
      // The note, and under it the key's entitlement codes as chips (the first three, then "+N").
      id: 'note',
      header: 'Note',
      title: (k) =>
        [k.note, k.entitlements.length > 0 ? `Entitlements: ${k.entitlements.join(', ')}` : '']
          .filter(Boolean)
          .join('\n') || undefined,
      cell: (k) => (
        <span className="stacked-cell">
          <span>{k.note}</span>
          <EntitlementChips codes={k.entitlements} />
        </span>
      ),
    },
    ...(actions
      ? [
          {
            id: 'actions',
            header: <span className="sr-only">Actions</span>,
            cell: (k: License) => (
              <MenuButton label={`Actions for ${k.key_preview}`} onOpen={(el) => openMenu(k, el)} />
            ),
          },
        ]
      : []),
  ];
}
