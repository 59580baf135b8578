// The request-nonce ledger (docs/protocol.md 3, 11.21) lives in PostgreSQL, the one store that survives a
// restart of every process and is shared by every worker: a nonce accepted once stays refused for
// its whole window even after a crash, a restart or a Redis without persistence.
import type { Sql } from '../../platform/db/sql.js';

export class NonceRepository {
  constructor(private readonly sql: Sql) {}

  /**
   * Records `nonce` for the application until `expiresAt`; true when this call recorded it. A row
   * left by an expired window is taken over, so the table needs no purge before a claim.
   */
  async claim(appId: string, nonce: string, expiresAt: Date, now: Date): Promise<boolean> {
    const rows = await this.sql.all(
      `insert into request_nonces (app_id, nonce, expires_at) values (?, ?, ?)
       on conflict (app_id, nonce) do update set expires_at = excluded.expires_at where request_nonces.expires_at <= ?
       returning 1`,
      [appId, nonce, expiresAt, now],
    );
    return rows.length === 1;
  }

  /** Deletes windows that have ended; returns how many. */
  purgeExpired(now: Date): Promise<number> {
    return this.sql.run('delete from request_nonces where expires_at <= ?', [now]);
  }
}
