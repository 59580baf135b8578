// An application's entitlement catalogue (docs/protocol.md 12.3). Keys carry codes (the keys module's
// license_keys.entitlements); replacing the catalogue has the keys module take the codes it dropped
// off every key of the application in the same transaction, so a key never holds a code the
// catalogue does not have.
import type { Sql } from '../../platform/db/sql.js';

export interface EntitlementEntry {
  code: string;
  name: string;
}

export class EntitlementRepository {
  constructor(
    private readonly sql: Sql,
    /** The keys module: keys keep only the codes in `codes` (a JSON array), inside transaction `tx`. */
    private readonly keepOnly: (appId: string, codes: string, tx: unknown) => Promise<number>,
  ) {}

  list(appId: string): Promise<EntitlementEntry[]> {
    return this.sql.all<EntitlementEntry>(
      'select code, name from app_entitlements where app_id = ? order by position, code',
      [appId],
    );
  }

  /** Replaces the catalogue; returns how many keys lost a code. */
  replace(appId: string, entries: readonly EntitlementEntry[]): Promise<number> {
    return this.sql.transaction(async (tx) => {
      await this.sql.run('delete from app_entitlements where app_id = ?', [appId], tx);
      if (entries.length > 0) {
        const values: unknown[] = [];
        entries.forEach((e, i) => values.push(appId, e.code, e.name, i));
        await this.sql.run(
          `insert into app_entitlements (app_id, code, name, position)
           values ${entries.map(() => '(?, ?, ?, ?)').join(', ')}`,
          values,
          tx,
        );
      }
      const codes = JSON.stringify(entries.map((e) => e.code));
      // Keys whose codes are not all in the new catalogue keep only those that are.
      return this.keepOnly(appId, codes, tx);
    });
  }
}
