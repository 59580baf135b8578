// What other modules ask of the keys module's tables (license_keys, end_users) about an
// application's records: which application a record is in, how many an application holds, and
// the entitlement codes a changed catalogue takes off its keys (in the caller's transaction), and
// keys' previews.
import type { Sql } from '../../platform/db/sql.js';

export class KeyRecordsRepository {
  constructor(private readonly sql: Sql) {}

  /** The application a key (`license_keys`) or an end user (`end_users`) belongs to; null when there is none. */
  async appOf(kind: 'license' | 'user', id: string): Promise<string | null> {
    const table = kind === 'license' ? 'license_keys' : 'end_users';
    const row = await this.sql.one<{ app_id: string }>(`select app_id from ${table} where id = ?`, [id]);
    return row?.app_id ?? null;
  }

  /** Key and user counts per application (SPEC "stats"), one grouped query each. */
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
}
