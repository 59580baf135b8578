// The customer portal's own tables (docs/protocol.md 14.1-14.3): sign-ins (the token's SHA-256) and the
// device reset with its cooldown claimed atomically. The key, its end user and the application are
// read through the keys and apps modules.
import type { Sql } from '../../platform/db/sql.js';

export interface PortalSessionRow {
  app_id: string;
  license_id: string;
  user_id: string | null;
}

export class PortalRepository {
  constructor(
    private readonly sql: Sql,
    /** The keys module: every device of the key and of its end user cleared, inside transaction `tx`. */
    private readonly clearDevices: (licenseId: string, tx: unknown) => Promise<void>,
  ) {}

  async createSession(tokenHash: string, s: PortalSessionRow, now: Date, expiresAt: Date): Promise<void> {
    await this.sql.run(
      `insert into portal_sessions (token_hash, app_id, license_id, user_id, created_at, expires_at)
       values (?, ?, ?, ?, ?, ?)`,
      [tokenHash, s.app_id, s.license_id, s.user_id, now, expiresAt],
    );
  }

  session(tokenHash: string, now: Date): Promise<PortalSessionRow | undefined> {
    return this.sql.one<PortalSessionRow>(
      'select app_id, license_id, user_id from portal_sessions where token_hash = ? and expires_at > ?',
      [tokenHash, now],
    );
  }

  async deleteSession(tokenHash: string): Promise<void> {
    await this.sql.run('delete from portal_sessions where token_hash = ?', [tokenHash]);
  }

  async purgeSessions(now: Date): Promise<void> {
    await this.sql.run('delete from portal_sessions where expires_at <= ?', [now]);
  }

  lastReset(licenseId: string): Promise<{ reset_at: Date | string } | undefined> {
    return this.sql.one('select reset_at from portal_resets where license_id = ?', [licenseId]);
  }

  /**
   * Claims a reset if none happened after `cutoff` (one conditional upsert: two concurrent resets
   * never both pass the cooldown), then clears the key's and its end user's HWID in one transaction.
   * false: on cooldown, nothing changed.
   */
  /**
   * Starts the cooldown unless one runs (false then); with `all`, clears every device of the key and
   * of its end user too. One device is removed by the caller (DeviceRepository.remove).
   */
  resetDevices(licenseId: string, now: Date, cutoff: Date, all: boolean): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const claimed = await this.sql.one(
        `insert into portal_resets (license_id, reset_at) values (?, ?)
         on conflict (license_id) do update set reset_at = excluded.reset_at where portal_resets.reset_at <= ?
         returning license_id`,
        [licenseId, now, cutoff],
        tx,
      );
      if (!claimed) return false;
      if (!all) return true;
      await this.clearDevices(licenseId, tx);
      return true;
    });
  }
}
