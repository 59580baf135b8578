// Two-factor state of dashboard accounts (docs/protocol.md 13.2): the sealed secret and the pending one,
// the last accepted time step, the recovery codes (keyed hashes) and an owner's policy. Every
// "accepted once" rule is a conditional UPDATE, so two workers never both accept one code.
import type { Sql } from '../../platform/db/sql.js';

export class TwoFactorRepository {
  constructor(private readonly sql: Sql) {}

  async setPending(accountId: string, sealed: string): Promise<void> {
    await this.sql.run('update accounts set two_factor_pending = ? where id = ?', [sealed, accountId]);
  }

  /**
   * Turns the pending secret on (only if it is still the one the code was checked against and
   * two-factor is still off) with its first accepted step and a new set of recovery codes.
   */
  enable(accountId: string, pending: string, step: number, codeHashes: readonly string[]): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const changed = await this.sql.run(
        `update accounts set two_factor_secret = two_factor_pending, two_factor_pending = null,
           two_factor_last_step = ?
         where id = ? and two_factor_pending = ? and two_factor_secret is null`,
        [step, accountId, pending],
        tx,
      );
      if (changed === 0) return false;
      await this.sql.run('delete from two_factor_recovery_codes where account_id = ?', [accountId], tx);
      await this.sql.run(
        `insert into two_factor_recovery_codes (account_id, code_hash)
         select ?::uuid, h from jsonb_array_elements_text(?::jsonb) as h`,
        [accountId, JSON.stringify(codeHashes)],
        tx,
      );
      return true;
    });
  }

  /** Turns two-factor off and forgets its secrets and codes; false when it was off. */
  clear(accountId: string): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      const changed = await this.sql.run(
        `update accounts set two_factor_secret = null, two_factor_pending = null, two_factor_last_step = null
         where id = ? and (two_factor_secret is not null or two_factor_pending is not null)`,
        [accountId],
        tx,
      );
      await this.sql.run('delete from two_factor_recovery_codes where account_id = ?', [accountId], tx);
      return changed > 0;
    });
  }

  /** Accepts a TOTP step once: true only if it is later than every step accepted before. */
  async claimStep(accountId: string, step: number): Promise<boolean> {
    const changed = await this.sql.run(
      `update accounts set two_factor_last_step = ?
       where id = ? and two_factor_secret is not null
         and (two_factor_last_step is null or two_factor_last_step < ?)`,
      [step, accountId, step],
    );
    return changed > 0;
  }

  /** Uses a recovery code once: true only for an unused code of this account. */
  async useRecoveryCode(accountId: string, codeHash: string, now: Date): Promise<boolean> {
    const changed = await this.sql.run(
      `update two_factor_recovery_codes set used_at = ?
       where account_id = ? and code_hash = ? and used_at is null`,
      [now, accountId, codeHash],
    );
    return changed > 0;
  }

  async unusedRecoveryCodes(accountId: string): Promise<number> {
    const row = await this.sql.one<{ n: string | number }>(
      'select count(*) as n from two_factor_recovery_codes where account_id = ? and used_at is null',
      [accountId],
    );
    return Number(row?.n ?? 0);
  }

  async setPolicy(ownerId: string, require: boolean): Promise<void> {
    await this.sql.run('update accounts set require_two_factor = ? where id = ?', [require, ownerId]);
  }

  /** Whether the owner of a tree requires two-factor sign-in of its members. */
  async ownerRequires(ownerId: string): Promise<boolean> {
    const row = await this.sql.one<{ r: boolean }>('select require_two_factor as r from accounts where id = ?', [
      ownerId,
    ]);
    return row?.r === true;
  }
}
