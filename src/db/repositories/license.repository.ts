import { randomUUID } from 'node:crypto';
import type { DurationUnit } from '../entities/index.js';
import type { Sql } from '../sql.js';
import { AppError } from '../../errors.js';

export interface NewKey {
  keyHash: string;
  keyPreview: string;
}

export interface KeyBatch {
  appId: string;
  level: number;
  durationValue: number;
  durationUnit: DurationUnit;
  durationDays: number;
  note: string;
  resellerId: string | null;
  createdBy: string | null;
  /** Credits to take from `chargeAccountId` in the same transaction; null: nothing to charge. */
  charge: { accountId: string; amount: number } | null;
}

export interface LicenseRow {
  id: string;
  app_id: string;
  key_preview: string;
  status: string;
  used_by: string;
  user_id: string | null;
  hwid: string;
  ip: string;
  level: number;
  duration_value: number;
  duration_unit: DurationUnit;
  duration_days: number;
  created_at: Date;
  last_login: Date | null;
  expires_at: Date | null;
  pending_since: Date | null;
  note: string;
  reseller_id: string | null;
  created_by: string | null;
}

export const LICENSE_COLUMNS = `id, app_id, key_preview, status, used_by, user_id, hwid, ip, level, duration_value, duration_unit,
  duration_days, created_at, last_login, expires_at, pending_since, note, reseller_id, created_by`;

export class LicenseRepository {
  constructor(private readonly sql: Sql) {}

  /**
   * Inserts a batch of keys and charges credits in one transaction. `makeKey` is called again for
   * a key whose hash already exists in the app (a collision), so the batch always has `amount` keys.
   * The charge is a conditional UPDATE: concurrent generations against one balance never overdraw.
   */
  async insertBatch(batch: KeyBatch, amount: number, makeKey: () => NewKey & { plaintext: string }, now: Date): Promise<{ row: LicenseRow; key: string }[]> {
    return this.sql.transaction(async (tx) => {
      if (batch.charge) {
        const charged = await this.sql.run(
          'update accounts set key_quota = key_quota - ?, updated_at = ? where id = ? and key_quota is not null and key_quota >= ?',
          [batch.charge.amount, now, batch.charge.accountId, batch.charge.amount], tx,
        );
        if (charged === 0) {
          const unlimited = await this.sql.one('select 1 from accounts where id = ? and key_quota is null', [batch.charge.accountId], tx);
          if (!unlimited) throw new AppError('insufficient_credits');
        }
      }
      const out: { row: LicenseRow; key: string }[] = [];
      // One multi-row INSERT per round; a hash collision (astronomically rare with a sane mask)
      // is skipped by ON CONFLICT and regenerated in the next round.
      for (let round = 0; out.length < amount; round++) {
        if (round > 10) throw new Error('license key space exhausted for this mask and alphabet');
        const byHash = new Map<string, string>();
        const values: unknown[] = [];
        while (byHash.size < amount - out.length) {
          const k = makeKey();
          if (byHash.has(k.keyHash)) continue;
          byHash.set(k.keyHash, k.plaintext);
          values.push(randomUUID(), batch.appId, k.keyHash, k.keyPreview, batch.level, batch.durationValue, batch.durationUnit,
            batch.durationDays, now, batch.note, batch.resellerId, batch.createdBy);
        }
        const rows = await this.sql.all<LicenseRow & { key_hash: string }>(
          `insert into license_keys (id, app_id, key_hash, key_preview, status, level, duration_value, duration_unit, duration_days,
             created_at, note, reseller_id, created_by)
           values ${[...byHash.keys()].map(() => "(?, ?, ?, ?, 'unused', ?, ?, ?, ?, ?, ?, ?, ?)").join(', ')}
           on conflict (app_id, key_hash) do nothing returning key_hash, ${LICENSE_COLUMNS}`,
          values, tx,
        );
        for (const { key_hash, ...row } of rows) out.push({ row, key: byHash.get(key_hash)! });
      }
      return out;
    });
  }
}
