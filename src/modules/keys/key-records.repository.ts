// What other modules ask of the keys module's tables (license_keys, end_users) about an
// application's records: which application a record is in, how many an application holds, and
// the entitlement codes a changed catalogue takes off its keys (in the caller's transaction), and
// keys' previews, and a trial's key.
import type { Sql } from '../../platform/db/sql.js';

export class KeyRecordsRepository {
  constructor(private readonly sql: Sql) {}

  /** The application a key (`license_keys`) or an end user (`end_users`) belongs to; null when there is none. */
  async appOf(kind: 'license' | 'user', id: string): Promise<string | null> {
    const table = kind === 'license' ? 'license_keys' : 'end_users';
    const row = await this.sql.one<{ app_id: string }>(`select app_id from ${table} where id = ?`, [id]);
    return row?.app_id ?? null;
  }

  /** Key and user counts per application (docs/spec.md "Application"), one grouped query each. */
  async counts(
    ids: readonly string[],
    /** Only records whose reseller_id is one of these (a reseller's own); undefined: every record. */
    resellerIds?: readonly string[],
  ): Promise<Map<string, { keys: number; users: number }>> {
    const out = new Map<string, { keys: number; users: number }>(ids.map((id) => [id, { keys: 0, users: 0 }]));
    if (ids.length === 0 || resellerIds?.length === 0) return out;
    const marks = ids.map(() => '?').join(',');
    const scoped = resellerIds ? ` and reseller_id in (${resellerIds.map(() => '?').join(',')})` : '';
    const params = [...ids, ...(resellerIds ?? [])];
    const [keys, users] = await Promise.all([
      this.sql.all<{ app_id: string; n: string }>(
        `select app_id, count(*) as n from license_keys where app_id in (${marks})${scoped} group by app_id`,
        params,
      ),
      this.sql.all<{ app_id: string; n: string }>(
        `select app_id, count(*) as n from end_users where app_id in (${marks})${scoped} group by app_id`,
        params,
      ),
    ]);
    for (const r of keys) out.get(r.app_id)!.keys = Number(r.n);
    for (const r of users) out.get(r.app_id)!.users = Number(r.n);
    return out;
  }

  /**
   * Keys of the application whose codes are not all in `codes` (a JSON array) keep only those that
   * are; returns how many keys lost a code. Runs inside the caller's transaction `tx`.
   */
  keepOnlyEntitlements(appId: string, codes: string, tx: unknown): Promise<number> {
    return this.sql.run(
      `update license_keys set entitlements = coalesce(
         (select jsonb_agg(c order by c) from jsonb_array_elements_text(entitlements) as c
          where c in (select jsonb_array_elements_text(?::jsonb))), '[]'::jsonb)
       where app_id = ? and not (entitlements <@ ?::jsonb)`,
      [codes, appId, codes],
      tx,
    );
  }

  /** Each key's preview by id (an order's keys); ids of deleted keys are absent. */
  async previews(ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.sql.all<{ id: string; key_preview: string }>(
      `select id, key_preview from license_keys where id in (${ids.map(() => '?').join(',')})`,
      [...ids],
    );
    return new Map(rows.map((r) => [r.id, r.key_preview]));
  }

  /**
   * A trial's key (docs/protocol.md 12.4), created already activated license-only on its HWID with that
   * device bound, inside the trial's transaction `tx`. false: the key hash is taken (a collision).
   */
  async insertTrialKey(
    t: {
      licenseId: string;
      appId: string;
      hwid: string;
      ip: string;
      keyHash: string;
      keyPreview: string;
      level: number;
      hours: number;
      now: Date;
      expiresAt: Date;
    },
    tx: unknown,
  ): Promise<boolean> {
    const inserted = await this.sql.one(
      `insert into license_keys (id, app_id, key_hash, key_preview, status, used_by, hwid, ip, level,
         duration_value, duration_unit, duration_days, created_at, last_login, expires_at, note)
       values (?, ?, ?, ?, 'used', 'license-only', ?, ?, ?, ?, 'hours', ?, ?, ?, ?, 'trial')
       on conflict (app_id, key_hash) do nothing returning id`,
      [
        t.licenseId,
        t.appId,
        t.keyHash,
        t.keyPreview,
        t.hwid,
        t.ip,
        t.level,
        t.hours,
        Math.max(1, Math.ceil(t.hours / 24)),
        t.now,
        t.now,
        t.expiresAt,
      ],
      tx,
    );
    if (!inserted) return false;
    await this.sql.run(
      `insert into key_devices (license_id, hwid, first_seen, last_seen, bound) values (?, ?, ?, ?, true)`,
      [t.licenseId, t.hwid, t.now, t.now],
      tx,
    );
    return true;
  }
}
