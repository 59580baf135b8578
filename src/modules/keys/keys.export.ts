// CSV exports of keys and end users (docs/protocol.md 15.5): the listings' filters and scoping, page by page
// through their cursors, each row through the same view as the listing, so hiding is the listing's; a
// column the caller may not see is left out (access/visibility.ts).
import type { Reply } from '../../platform/http/types.js';
import { csvReply } from '../../platform/http/csv.js';
import { sightOf, visibleColumns, type Principal } from '../access/index.js';
import type { KeysAdminService } from './keys.service.js';
import type { StatusFilter } from './license-status.js';
import { hiddenLicenseView, userView } from './keys.view.js';

const PAGE = 1000;

const LICENSE_CSV = [
  'id',
  'key_preview',
  'status',
  'computed_status',
  'level',
  'duration_value',
  'duration_unit',
  'used_by',
  'hwid',
  'ip',
  'known_countries',
  'created_at',
  'last_login',
  'expires_at',
  'note',
  'reseller_id',
  'created_by',
];

const USER_CSV = [
  'id',
  'username',
  'key_preview',
  'level',
  'banned',
  'created_at',
  'last_login',
  'expires_at',
  'hwid',
  'ip',
  'known_countries',
  'license_id',
  'reseller_id',
];

async function* pages<T>(
  read: (cursor: string | undefined) => Promise<{ rows: T[]; nextCursor: string | null }>,
): AsyncGenerator<T[]> {
  let cursor: string | undefined;
  for (;;) {
    const { rows, nextCursor } = await read(cursor);
    yield rows;
    if (!nextCursor) return;
    cursor = nextCursor;
  }
}

async function* mapPages<T>(source: AsyncGenerator<T[]>, cells: (row: T) => unknown[]): AsyncGenerator<unknown[][]> {
  for await (const rows of source) yield rows.map(cells);
}

export function licensesCsv(
  keys: KeysAdminService,
  p: Principal,
  appId: string,
  q: { status?: StatusFilter; q?: string },
  now: () => number,
): Promise<Reply> {
  const columns = visibleColumns(sightOf(p), LICENSE_CSV);
  const source = pages((cursor) => keys.listLicenses(p, appId, { ...q, limit: PAGE, cursor }));
  return csvReply(
    `licenses-${appId}.csv`,
    columns,
    mapPages(source, (r) => {
      const v = hiddenLicenseView(p, r, now()) as Record<string, unknown>;
      return columns.map((c) => v[c]);
    }),
  );
}

export function usersCsv(keys: KeysAdminService, p: Principal, appId: string, q: { q?: string }): Promise<Reply> {
  const columns = visibleColumns(sightOf(p), USER_CSV);
  const source = pages((cursor) => keys.listUsers(p, appId, { ...q, limit: PAGE, cursor }));
  return csvReply(
    `users-${appId}.csv`,
    columns,
    mapPages(source, (u) => {
      const v = userView(p, u) as Record<string, unknown>;
      return columns.map((c) => v[c]);
    }),
  );
}
