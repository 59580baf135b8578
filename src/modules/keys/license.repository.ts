import { randomUUID } from 'node:crypto';
import type { ImportedKey } from './keys.import.js';
import type { DurationUnit } from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';
import { ReadBatcher } from '../../platform/db/read-batcher.js';
import { AppError } from '../../errors.js';
import type { Device } from './device.repository.js';

const MAX_ROUNDS = 10;
/** The placeholders of one generated key's row. */
const ROW = "(?, ?, ?, ?, 'unused', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb)";

/** The mask and alphabet could not yield enough keys that are new for the application. */
export class KeySpaceExhausted extends Error {
  constructor() {
    super('license key space exhausted');
  }
}

interface NewKey {
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
  /** docs/protocol.md 12.2: the keys' own max_sessions (null: the application's). */
  maxSessions: number | null;
  maxDevices: number | null;
  /** JSON of the sorted entitlement codes. */
  entitlements: string;
  /** Credits to take from `chargeAccountId` in the same transaction; null: nothing to charge. */
  charge: { accountId: string; amount: number } | null;
}

/** Statements run inside a batch's transaction: before its keys, and after them with the keys written. */
export interface BatchHooks {
  first?: (tx: unknown) => Promise<void>;
  last?: (tx: unknown, created: readonly { row: LicenseRow; key: string }[]) => Promise<void>;
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
  activation_geo: Record<string, unknown> | null;
  last_geo: Record<string, unknown> | null;
  known_countries: string[];
  screenshot_path: string;
  max_sessions: number | null;
  max_devices: number | null;
  entitlements: string[];
  /** The holder's devices (docs/protocol.md 12.1), attached by the service when it shows a key. */
  devices?: Device[];
}

export const LICENSE_COLUMNS = `id, app_id, key_preview, status, used_by, user_id, hwid, ip, level, duration_value,
  duration_unit, duration_days, created_at, last_login, expires_at, pending_since, note, reseller_id, created_by,
  activation_geo, last_geo, known_countries, screenshot_path, max_sessions, max_devices, entitlements`;

interface SeatPolicy {
  maxSessions: number | null;
  resellerId: string | null;
}

export class LicenseRepository {
  /** Heartbeat starts of one event-loop turn (a fleet reconnecting) share one statement. */
  private readonly seatReads = new ReadBatcher<string, SeatPolicy | null>((ids) => this.seatPolicies(ids));

  constructor(private readonly sql: Sql) {}

  /** What a heartbeat start needs of its key (docs/protocol.md 12.2); null when the key is gone. */
  /**
   * Activated keys that are not lifetime and whose expiry fell in [from, to): the expiry watch's
   * read (heartbeat/expiry-watch.ts). `expires_at < to` is hasExpired's rule at the instant `to`.
   */
  async expiredBetween(from: Date, to: Date, limit: number) {
    const rows = await this.sql.all<{
      id: string;
      app_id: string;
      reseller_id: string | null;
      expires_at: Date | string;
    }>(
      `select id, app_id, reseller_id, expires_at from license_keys
       where expires_at >= ? and expires_at < ? and duration_days <> 0 and status in ('used', 'pending')
       order by expires_at limit ?`,
      [from, to, limit],
    );
    return rows.map((r) => ({ ...r, expires_at: new Date(r.expires_at) }));
  }

  seatPolicy(id: string): Promise<SeatPolicy | null> {
    return this.seatReads.load(id);
  }

  private async seatPolicies(ids: readonly string[]): Promise<(SeatPolicy | null)[]> {
    const r = await this.sql.prepared<{ i: string; max_sessions: number | null; reseller_id: string | null }>(
      `select q.i, k.max_sessions, k.reseller_id
       from unnest($1::uuid[]) with ordinality as q(id, i) join license_keys k on k.id = q.id`,
      [ids],
    );
    const out = new Array<SeatPolicy | null>(ids.length).fill(null);
    for (const row of r.rows) out[Number(row.i) - 1] = { maxSessions: row.max_sessions, resellerId: row.reseller_id };
    return out;
  }

  /** Which of these key hashes the application has already. */
  async existingHashes(appId: string, hashes: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (let i = 0; i < hashes.length; i += 5000) {
      const chunk = hashes.slice(i, i + 5000);
      const rows = await this.sql.all<{ key_hash: string }>(
        `select key_hash from license_keys where app_id = ? and key_hash in (${chunk.map(() => '?').join(',')})`,
        [appId, ...chunk],
      );
      for (const r of rows) found.add(r.key_hash);
    }
    return found;
  }

  /**
   * Imported keys (docs/protocol.md 15.6), in one transaction, 1,000 a statement; a key whose hash the app
   * has already is left alone. Returns the hashes that were inserted.
   */
  async insertImported(
    appId: string,
    keys: readonly (ImportedKey & { keyHash: string })[],
    by: { createdBy: string; resellerId: string | null },
    now: Date,
  ): Promise<Set<string>> {
    return this.sql.transaction(async (tx) => {
      const inserted = new Set<string>();
      for (let i = 0; i < keys.length; i += 1000) {
        const chunk = keys.slice(i, i + 1000);
        const values: unknown[] = [];
        for (const k of chunk)
          values.push(
            randomUUID(),
            appId,
            k.keyHash,
            k.preview,
            k.status,
            k.level,
            k.durationValue,
            k.durationUnit,
            k.durationDays,
            now,
            k.note,
            by.resellerId,
            by.createdBy,
            k.usedBy,
            k.hwid,
            k.expiresAt,
          );
        const rows = await this.sql.all<{ key_hash: string }>(
          `insert into license_keys (id, app_id, key_hash, key_preview, status, level, duration_value, duration_unit,
             duration_days, created_at, note, reseller_id, created_by, used_by, hwid, expires_at)
           values ${chunk.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::timestamptz)').join(', ')}
           on conflict (app_id, key_hash) do nothing returning key_hash`,
          values,
          tx,
        );
        for (const r of rows) inserted.add(r.key_hash);
      }
      return inserted;
    });
  }

  /**
   * Inserts a batch of keys and charges credits in one transaction. `makeKey` is called again for
   * a key whose hash already exists in the app (a collision), so the batch always has `amount` keys;
   * it returns null when it has no candidate left.
   * The charge is a conditional UPDATE: concurrent generations against one balance never overdraw.
   */
  async insertBatch(
    batch: KeyBatch,
    amount: number,
    makeKey: () => (NewKey & { plaintext: string }) | null,
    now: Date,
    hooks: BatchHooks = {},
  ): Promise<{ row: LicenseRow; key: string }[]> {
    return this.sql.transaction(async (tx) => {
      await hooks.first?.(tx);
      if (batch.charge) {
        const charged = await this.sql.run(
          `update accounts set key_quota = key_quota - ?, updated_at = ?
           where id = ? and key_quota is not null and key_quota >= ?`,
          [batch.charge.amount, now, batch.charge.accountId, batch.charge.amount],
          tx,
        );
        if (charged === 0) {
          const unlimited = await this.sql.one(
            'select 1 from accounts where id = ? and key_quota is null',
            [batch.charge.accountId],
            tx,
          );
          if (!unlimited) throw new AppError('insufficient_credits');
        }
      }
      const out: { row: LicenseRow; key: string }[] = [];
      // One multi-row INSERT per round; a key that exists already is skipped by ON CONFLICT and
      // replaced in the next round. Draws and rounds are bounded: a mask whose key space is used
      // up ends in KeySpaceExhausted (the transaction rolls back: nothing created, nothing charged).
      for (let round = 0; out.length < amount; round++) {
        if (round >= MAX_ROUNDS) throw new KeySpaceExhausted();
        const byHash = new Map<string, string>();
        const values: unknown[] = [];
        const need = amount - out.length;
        for (let draws = need * 20 + 100; byHash.size < need && draws > 0; draws--) {
          const k = makeKey();
          if (k === null) break;
          if (byHash.has(k.keyHash)) continue;
          byHash.set(k.keyHash, k.plaintext);
          values.push(
            randomUUID(),
            batch.appId,
            k.keyHash,
            k.keyPreview,
            batch.level,
            batch.durationValue,
            batch.durationUnit,
            batch.durationDays,
            now,
            batch.note,
            batch.resellerId,
            batch.createdBy,
            batch.maxSessions,
            batch.maxDevices,
            batch.entitlements,
          );
        }
        if (byHash.size === 0) throw new KeySpaceExhausted();
        const rows = await this.sql.all<LicenseRow & { key_hash: string }>(
          `insert into license_keys (id, app_id, key_hash, key_preview, status, level, duration_value, duration_unit,
             duration_days, created_at, note, reseller_id, created_by, max_sessions, max_devices, entitlements)
           values ${[...byHash.keys()].map(() => ROW).join(', ')}
           on conflict (app_id, key_hash) do nothing returning key_hash, ${LICENSE_COLUMNS}`,
          values,
          tx,
        );
        for (const { key_hash, ...row } of rows) out.push({ row, key: byHash.get(key_hash)! });
      }
      await hooks.last?.(tx, out);
      return out;
    });
  }
}
