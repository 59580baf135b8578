// Dashboard-side queries on license keys and end users. Reseller scoping is part of every query
// (`reseller_id in (...)`), so a direct call with a peer's id finds nothing (docs/protocol.md 11.9).
import { toDate, type Sql } from '../../platform/db/sql.js';
import { STATUS_SQL, filterNeedsNow, type StatusFilter } from './license-status.js';
import { LICENSE_COLUMNS, type LicenseRow } from './license.repository.js';
import type { Device } from './device.repository.js';
import type { KeyTouchesRepository } from './key-touches.repository.js';

/** undefined: every record of the app; a list: only records whose reseller_id is in it. */
export type ResellerScope = readonly string[] | undefined;

export type TimeseriesMetric = 'activations' | 'logins' | 'beats' | 'new_users';

/** Each metric's table, time column, count and filter. */
const METRIC_SQL: Record<TimeseriesMetric, [string, string, string, string]> = {
  activations: [
    'audit_log',
    'at',
    'count(*)',
    " and level = 'info' and action in ('client.register', 'client.license')",
  ],
  logins: ['audit_log', 'at', 'count(*)', " and level = 'info' and action = 'client.login'"],
  new_users: ['end_users', 'created_at', 'count(*)', ''],
  beats: ['beat_counts', 'hour', 'sum(beats)', ''],
};

function scopeSql(scope: ResellerScope, params: unknown[], column = 'reseller_id'): string {
  if (scope === undefined) return '';
  if (scope.length === 0) return ' and false';
  params.push(...scope);
  return ` and ${column} in (${scope.map(() => '?').join(',')})`;
}

interface LicenseListQuery {
  appId: string;
  scope: ResellerScope;
  status?: StatusFilter | undefined;
  q?: string | undefined;
  /** The keyed hash of `q`: a pasted full key matches exactly. */
  keyHash?: string | undefined;
  limit: number;
  cursor?: { createdAt: string; id: string } | undefined;
  now: Date;
}

interface UserListQuery {
  appId: string;
  scope: ResellerScope;
  q?: string | undefined;
  keyHash?: string | undefined;
  limit: number;
  cursor?: { createdAt: string; id: string } | undefined;
}

/**
 * The row's created_at to the microsecond, as the listing cursor carries it: a cursor cut to
 * milliseconds would skip the rows stored with more precision (PostgreSQL's now()).
 */
const CURSOR_AT = (table: string) =>
  `to_char(${table}created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at`;

/** `%q%` for ILIKE, with the pattern characters of q taken literally. */
function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface UserRow {
  id: string;
  app_id: string;
  username: string;
  created_at: Date | string;
  last_login: Date | string | null;
  ip: string;
  hwid: string;
  known_hwids: string[];
  known_countries: string[];
  level: number;
  expires_at: Date | string | null;
  banned: boolean;
  license_id: string | null;
  reseller_id: string | null;
  last_geo: Record<string, unknown> | null;
  geo: Record<string, unknown> | null;
  activation_geo: Record<string, unknown> | null;
  last_screenshot_path: string;
  activation_screenshot_path: string;
  screenshot_path: string;
  /** The user's devices (docs/protocol.md 12.1), attached by the service. */
  devices?: Device[];
  /** The preview of the key the user is bound to (listings only). */
  key_preview?: string | null;
}

const USER_COLUMNS = `id, app_id, username, created_at, last_login, ip, hwid, known_hwids, known_countries, level,
  expires_at, banned, license_id, reseller_id, last_geo, geo, activation_geo, last_screenshot_path,
  activation_screenshot_path, screenshot_path`;
const USER_LIST_COLUMNS = USER_COLUMNS.split(',')
  .map((c) => `u.${c.trim()}`)
  .join(', ');

/** docs/protocol.md 11.25: no expiry is stored past the last millisecond of 9999 (JavaScript dates end in 275760). */
const MAX_EXPIRY_MS = Date.parse('9999-12-31T23:59:59.999Z');
/** `expires_at + SHIFT`: one placeholder, the milliseconds. */
const SHIFT = `(? * interval '1 millisecond')`;

/** The listing's filters (status, text, reseller scope) as a where clause over license_keys. */
function listWhere(q: Omit<LicenseListQuery, 'limit' | 'cursor'>, params: unknown[]): string {
  params.push(q.appId);
  let where = 'app_id = ?';
  if (q.status) {
    where += ` and ${STATUS_SQL[q.status]}`;
    if (filterNeedsNow(q.status)) params.push(q.now);
  }
  if (q.q) {
    where += ` and (note ilike ? or used_by ilike ? or key_preview ilike ? or key_hash = ?)`;
    const like = likePattern(q.q);
    params.push(like, like, like, q.keyHash ?? '');
  }
  return where + scopeSql(q.scope, params);
}

export class KeyAdminRepository {
  constructor(
    private readonly sql: Sql,
    /** Touches written behind (last login, IP): flushed before a listing, so it shows this worker's latest. */
    private readonly touches?: KeyTouchesRepository,
  ) {}

  async listLicenses(q: LicenseListQuery): Promise<LicenseRow[]> {
    await this.touches?.flush().catch(() => undefined);
    const params: unknown[] = [];
    let where = listWhere(q, params);
    if (q.cursor) {
      where += ' and (created_at, id) < (?::timestamptz, ?::uuid)';
      params.push(q.cursor.createdAt, q.cursor.id);
    }
    params.push(q.limit);
    return this.sql.all<LicenseRow>(
      `select ${LICENSE_COLUMNS}, ${CURSOR_AT('')} from license_keys where ${where}
       order by created_at desc, id desc limit ?`,
      params,
    );
  }

  /**
   * The ids and previews of every key a listing with these filters would show (newest first), or of
   * those among `ids` (bulk jobs: the set a job acts on, fixed when it starts).
   */
  matchingIds(
    q: Omit<LicenseListQuery, 'limit' | 'cursor'> & { ids?: readonly string[] | undefined },
  ): Promise<{ id: string; key_preview: string }[]> {
    const params: unknown[] = [];
    let where = listWhere(q, params);
    if (q.ids) {
      where += ' and id in (select jsonb_array_elements_text(?::jsonb)::uuid)';
      params.push(JSON.stringify(q.ids));
    }
    return this.sql.all(
      `select id, key_preview from license_keys where ${where} order by created_at desc, id desc`,
      params,
    );
  }

  /** A key the caller may act on, or undefined. */
  findLicense(id: string): Promise<LicenseRow | undefined> {
    return this.sql.one<LicenseRow>(`select ${LICENSE_COLUMNS} from license_keys where id = ?`, [id]);
  }

  /**
   * Moves an activated, non-lifetime key's expiry (and its user's) by `deltaMs`; returns the new
   * expiry, or 'out_of_range' when it would leave [1970, 9999-12-31] (nothing is written).
   */
  async shiftExpiry(id: string, deltaMs: number): Promise<Date | string | null | 'out_of_range'> {
    return this.sql.transaction(async (tx) => {
      const row = await this.sql.one<{ expires_at: Date | string }>(
        'select expires_at from license_keys where id = ? and expires_at is not null for update',
        [id],
        tx,
      );
      if (!row) return null;
      // Computed here, not in SQL: PostgreSQL itself fails on results before 4713 BC.
      const next = toDate(row.expires_at)!.getTime() + deltaMs;
      if (next < 0 || next > MAX_EXPIRY_MS) return 'out_of_range';
      const at = new Date(next);
      await this.sql.run('update license_keys set expires_at = ? where id = ?', [at, id], tx);
      await this.sql.run('update end_users set expires_at = ? where license_id = ?', [at, id], tx);
      return at;
    });
  }

  /**
   * extend-all: every active key in scope gets `deltaMs`; returns how many were extended and skipped,
   * or 'out_of_range' when one of them would pass 9999-12-31 (then none is changed).
   */
  async extendActive(
    appId: string,
    scope: ResellerScope,
    deltaMs: number,
    now: Date,
  ): Promise<{ extended: number; skipped: number } | 'out_of_range'> {
    return this.sql.transaction(async (tx) => {
      // Active by the one rule (STATUS_SQL.active: `?` is now), and with an expiry to move (not lifetime).
      const active = `app_id = ? and ${STATUS_SQL.active} and expires_at is not null and duration_days <> 0`;
      const checkParams: unknown[] = [appId, now];
      const latest = await this.sql.one<{ at: Date | string | null }>(
        `select max(expires_at) as at from license_keys where ${active}${scopeSql(scope, checkParams)}`,
        checkParams,
        tx,
      );
      const last = toDate(latest?.at);
      if (last && last.getTime() + deltaMs > MAX_EXPIRY_MS) return 'out_of_range';
      const params: unknown[] = [deltaMs, appId, now];
      const scoped = scopeSql(scope, params);
      const ids = await this.sql.all<{ id: string; expires_at: string }>(
        `update license_keys set expires_at = expires_at + ${SHIFT}
         where ${active}${scoped}
         returning id, expires_at`,
        params,
        tx,
      );
      for (const r of ids)
        await this.sql.run('update end_users set expires_at = ? where license_id = ?', [r.expires_at, r.id], tx);
      const totalParams: unknown[] = [appId];
      const total = await this.sql.one<{ n: string }>(
        `select count(*) as n from license_keys where app_id = ?${scopeSql(scope, totalParams)}`,
        totalParams,
        tx,
      );
      return { extended: ids.length, skipped: Number(total?.n ?? 0) - ids.length };
    });
  }

  /** Clears the HWID pin and every device of a key and of the user bound to it (docs/protocol.md 12.1). */
  async resetLicenseHwid(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await this.sql.run(`update license_keys set hwid = '' where id = ?`, [id], tx);
      await this.sql.run('delete from key_devices where license_id = ?', [id], tx);
      await this.sql.run(`update end_users set hwid = '', known_hwids = '[]'::jsonb where license_id = ?`, [id], tx);
      await this.sql.run(
        'delete from user_devices where user_id in (select id from end_users where license_id = ?)',
        [id],
        tx,
      );
    });
  }

  /**
   * docs/protocol.md 15.2: level, note, max_devices, max_sessions and entitlements of a key; a new level reaches
   * its user too.
   */
  async updateLicense(
    id: string,
    c: {
      level?: number;
      note?: string;
      maxDevices?: number | null;
      maxSessions?: number | null;
      entitlements?: string[];
    },
  ): Promise<void> {
    const sets: [string, unknown][] = [];
    if (c.level !== undefined) sets.push(['level = ?', c.level]);
    if (c.note !== undefined) sets.push(['note = ?', c.note]);
    if (c.maxDevices !== undefined) sets.push(['max_devices = ?', c.maxDevices]);
    if (c.maxSessions !== undefined) sets.push(['max_sessions = ?', c.maxSessions]);
    if (c.entitlements !== undefined) sets.push(['entitlements = ?::jsonb', JSON.stringify(c.entitlements)]);
    if (sets.length === 0) return;
    await this.sql.transaction(async (tx) => {
      await this.sql.run(
        `update license_keys set ${sets.map(([col]) => col).join(', ')} where id = ?`,
        [...sets.map(([, v]) => v), id],
        tx,
      );
      if (c.level !== undefined)
        await this.sql.run('update end_users set level = ? where license_id = ?', [c.level, id], tx);
    });
  }

  /** Bans, or unbans back to `used` when it was redeemed and `unused` otherwise (docs/protocol.md 9). */
  async setLicenseBanned(id: string, banned: boolean): Promise<string | undefined> {
    const row = await this.sql.one<{ status: string }>(
      banned
        ? `update license_keys set status = 'banned', pending_since = null where id = ? returning status`
        : `update license_keys set status = case when used_by <> '' then 'used' else 'unused' end
           where id = ? and status = 'banned' returning status`,
      [id],
    );
    return row?.status;
  }

  async deleteLicense(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      // The bound user stays, without a key: its next login fails (login joins on the key).
      await this.sql.run('update end_users set license_id = null where license_id = ?', [id], tx);
      await this.sql.run('delete from license_keys where id = ?', [id], tx);
    });
  }

  /** Newest first by (created_at, id); the cursor is the last row's pair, so every user is reached once. */
  listUsers(q: UserListQuery): Promise<UserRow[]> {
    const params: unknown[] = [q.appId];
    let where = `u.app_id = ?${scopeSql(q.scope, params, 'u.reseller_id')}`;
    if (q.q) {
      where += ' and (u.username ilike ? or k.key_preview ilike ? or k.key_hash = ?)';
      const like = likePattern(q.q);
      params.push(like, like, q.keyHash ?? '');
    }
    if (q.cursor) {
      where += ' and (u.created_at, u.id) < (?::timestamptz, ?::uuid)';
      params.push(q.cursor.createdAt, q.cursor.id);
    }
    params.push(q.limit);
    return this.sql.all<UserRow>(
      `select ${USER_LIST_COLUMNS}, k.key_preview, ${CURSOR_AT('u.')}
       from end_users u left join license_keys k on k.id = u.license_id
       where ${where} order by u.created_at desc, u.id desc limit ?`,
      params,
    );
  }

  findUser(id: string): Promise<UserRow | undefined> {
    return this.sql.one<UserRow>(`select ${USER_COLUMNS} from end_users where id = ?`, [id]);
  }

  async resetUserHwid(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await this.sql.run(`update end_users set hwid = '', known_hwids = '[]'::jsonb where id = ?`, [id], tx);
      await this.sql.run('delete from user_devices where user_id = ?', [id], tx);
    });
  }

  async setUserBanned(id: string, banned: boolean): Promise<void> {
    await this.sql.run('update end_users set banned = ? where id = ?', [banned, id]);
  }

  /**
   * Removes the user; its key stays `used` with its expiry and level, and can be registered again (docs/protocol.md
   * 11.10).
   */
  async deleteUser(id: string): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await this.sql.run('update license_keys set user_id = null where user_id = ?', [id], tx);
      await this.sql.run('delete from end_users where id = ?', [id], tx);
    });
  }

  async keyStats(appId: string, scope: ResellerScope, now: Date) {
    const params: unknown[] = [now, now, appId];
    const row = await this.sql.one<Record<string, string>>(
      `select count(*) as total,
         count(*) filter (where ${STATUS_SQL.banned}) as banned,
         count(*) filter (where ${STATUS_SQL.unactivated}) as unactivated,
         count(*) filter (where ${STATUS_SQL.active}) as active,
         count(*) filter (where ${STATUS_SQL.expired}) as expired
       from license_keys where app_id = ?${scopeSql(scope, params)}`,
      params,
    );
    const n = (k: string) => Number(row?.[k] ?? 0);
    return {
      total: n('total'),
      active: n('active'),
      banned: n('banned'),
      unactivated: n('unactivated'),
      expired: n('expired'),
    };
  }

  async userCount(appId: string, scope: ResellerScope): Promise<number> {
    const params: unknown[] = [appId];
    const row = await this.sql.one<{ n: string }>(
      `select count(*) as n from end_users where app_id = ?${scopeSql(scope, params)}`,
      params,
    );
    return Number(row?.n ?? 0);
  }

  async logins24h(appId: string, scope: ResellerScope, since: Date): Promise<number> {
    const params: unknown[] = [appId, since];
    const row = await this.sql.one<{ n: string }>(
      `select count(*) as n from audit_log
       where app_id = ? and action = 'client.login' and level = 'info' and at >= ?${scopeSql(scope, params)}`,
      params,
    );
    return Number(row?.n ?? 0);
  }

  /**
   * Counts per hour or day (UTC) in [from, to) of each of `appIds`: activations (successful register
   * and license calls), logins (successful), both from the audit log, new users (end_users.created_at),
   * or accepted heartbeats (beat_counts, hourly rows summed into days).
   */
  async timeseries(
    appIds: readonly string[],
    scope: ResellerScope,
    metric: TimeseriesMetric,
    bucket: 'hour' | 'day',
    from: Date,
    to: Date,
  ): Promise<Map<string, Map<number, number>>> {
    const out = new Map<string, Map<number, number>>(appIds.map((id) => [id, new Map()]));
    if (appIds.length === 0) return out;
    const [table, at, count, where] = METRIC_SQL[metric];
    const params: unknown[] = [bucket, `{${appIds.join(',')}}`, from, to];
    const rows = await this.sql.all<{ app_id: string; t: string; n: string }>(
      `select app_id, to_char(date_trunc(?, ${at} at time zone 'UTC'), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as t,
         ${count} as n from ${table}
       where app_id = any(?::uuid[]) and ${at} >= ? and ${at} < ?${where}${scopeSql(scope, params)} group by 1, 2`,
      params,
    );
    for (const r of rows) out.get(r.app_id)?.set(Date.parse(r.t), Number(r.n));
    return out;
  }
}
