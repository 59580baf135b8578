// The database side of license-key operations: reads, and conditional writes that carry out what
// the policy (license-policy.ts) decided. Every state change is conditional on the state
// it expects (`... WHERE status = 'unused'`), so two claims cannot both win even in different
// processes; the license actor only makes operations on one key take turns within a worker.
// Nothing here decides an answer to a client: methods report what the database did.
import type { DurationUnit, LicenseStatus } from '../../platform/db/entities/index.js';
import { toDate, type Sql } from '../../platform/db/sql.js';
import { deviceFactsOf, deviceFactsSql, type DeviceFacts, type DeviceFactsRow } from './device.repository.js';
import { ReadBatcher } from '../../platform/db/read-batcher.js';

/** A stored key as the license policy reads it. */
export interface StoredKey {
  status: LicenseStatus;
  usedBy: string;
  userId: string | null;
  hwid: string;
  level: number;
  durationValue: number;
  durationUnit: DurationUnit;
  expiresAt: Date | null;
  resellerId: string | null;
  /** null: the application's max_devices. */
  maxDevices: number | null;
  entitlements: string[];
}

interface KeyRow {
  status: LicenseStatus;
  used_by: string;
  user_id: string | null;
  hwid: string;
  level: number;
  duration_value: number;
  duration_unit: DurationUnit;
  expires_at: Date | string | null;
  reseller_id: string | null;
  max_devices: number | null;
  entitlements: string[];
}

const KEY_COLUMNS = `k.status, k.used_by, k.user_id, k.hwid, k.level, k.duration_value, k.duration_unit,
  k.expires_at, k.reseller_id, k.max_devices, k.entitlements`;

function storedKey(k: KeyRow): StoredKey {
  return {
    status: k.status,
    usedBy: k.used_by,
    userId: k.user_id,
    hwid: k.hwid,
    level: k.level,
    durationValue: k.duration_value,
    durationUnit: k.duration_unit,
    expiresAt: toDate(k.expires_at),
    resellerId: k.reseller_id,
    maxDevices: k.max_devices,
    entitlements: [...k.entitlements].sort(),
  };
}

/** The same rule as license-policy isClaimable, as the condition of the claim itself (docs/protocol.md 11.10). */
const CLAIMABLE = `(status = 'unused'
  or (status = 'used' and user_id is null and used_by not in ('', 'license-only')))`;

interface NewEndUser {
  id: string;
  appId: string;
  username: string;
  passwordHash: string;
  ip: string;
  /** Stored HWID: the activation's under hwid_lock, else '' (pinned at the first login). */
  hwid: string;
  knownHwid: string;
  level: number;
  expiresAt: Date | null;
  resellerId: string | null;
}

type FinaliseResult = 'done' | 'username_taken' | 'state_changed';

class Rollback extends Error {
  constructor(readonly result: FinaliseResult) {
    super(result);
  }
}

interface KeyWithDevice {
  key: StoredKey;
  device: DeviceFacts;
}

export class LicenseOpsRepository {
  private readonly keyReads = new ReadBatcher<readonly [string, string], KeyWithDevice | undefined>((asked) =>
    this.loadManyWithDevice(asked),
  );

  constructor(private readonly sql: Sql) {}

  /** Finds a key of an app by its keyed hash: the id its actor is keyed by. */
  async idByHash(appId: string, keyHash: string): Promise<string | undefined> {
    const r = await this.sql.prepared<{ id: string }>(
      'select id from license_keys where app_id = $1 and key_hash = $2',
      [appId, keyHash],
    );
    return r.rows[0]?.id;
  }

  async load(id: string): Promise<StoredKey | undefined> {
    const r = await this.sql.prepared<KeyRow>(`select ${KEY_COLUMNS} from license_keys k where k.id = $1`, [id]);
    return r.rows[0] && storedKey(r.rows[0]);
  }

  /**
   * The key and, in the same round trip, what its own devices say of `hwid` (docs/protocol.md 12.1: only
   * a license-only key's devices count; the caller decides whether they do). Reads of one
   * event-loop turn share one statement (ReadBatcher).
   */
  loadWithDevice(id: string, hwid: string): Promise<KeyWithDevice | undefined> {
    return this.keyReads.load([id, hwid]);
  }

  private async loadManyWithDevice(
    asked: readonly (readonly [string, string])[],
  ): Promise<(KeyWithDevice | undefined)[]> {
    const r = await this.sql.prepared<KeyRow & DeviceFactsRow & { i: string }>(
      `select q.i, ${KEY_COLUMNS}, d.bound, d.known, d.held
       from unnest($1::uuid[], $2::text[]) with ordinality as q(id, hwid, i)
       join license_keys k on k.id = q.id
       cross join lateral (select ${deviceFactsSql('q.hwid')} from key_devices where license_id = k.id) d`,
      [asked.map(([id]) => id), asked.map(([, hwid]) => hwid)],
    );
    const out = new Array<KeyWithDevice | undefined>(asked.length);
    for (const row of r.rows) out[Number(row.i) - 1] = { key: storedKey(row), device: deviceFactsOf(row) };
    return out;
  }

  /** A key's expiry (null: none, or the key is gone). */
  async expiryOf(id: string): Promise<Date | null> {
    const k = await this.sql.one<{ expires_at: Date | string | null; duration_unit: string }>(
      'select expires_at, duration_unit from license_keys where id = ?',
      [id],
    );
    return k && k.duration_unit !== 'lifetime' ? toDate(k.expires_at) : null;
  }

  /** unused (or reclaimable) -> pending, stamped; false when the key was not claimable any more. */
  async claim(id: string, stamp: Date): Promise<boolean> {
    return (
      (await this.sql.run(
        `update license_keys set status = 'pending', pending_since = ? where id = ? and ${CLAIMABLE}`,
        [stamp, id],
      )) === 1
    );
  }

  /**
   * pending -> used under the same claim stamp, creating the end user, in one transaction; nothing is
   * written when the username exists or the claim changed under us (a ban, a recovery).
   */
  async finalise(id: string, stamp: Date, user: NewEndUser, now: Date): Promise<FinaliseResult> {
    try {
      await this.sql.transaction(async (tx) => {
        const inserted = await this.sql.one(
          `insert into end_users (id, app_id, username, password_hash, created_at, last_login, ip, hwid, known_hwids,
             level, expires_at, banned, license_id, reseller_id)
           values (?, ?, ?, ?, ?, null, ?, ?, jsonb_build_array(?::text), ?, ?, false, ?, ?)
           on conflict (app_id, username) do nothing returning id`,
          [
            user.id,
            user.appId,
            user.username,
            user.passwordHash,
            now,
            user.ip,
            user.hwid,
            user.knownHwid,
            user.level,
            user.expiresAt,
            id,
            user.resellerId,
          ],
          tx,
        );
        if (!inserted) throw new Rollback('username_taken');
        // The account's first device (docs/protocol.md 12.1); under hwid_lock it holds the first place (docs/spec.md's
        // pin).
        await this.sql.run(
          `insert into user_devices (user_id, hwid, first_seen, last_seen, bound) values (?, ?, ?, ?, ?)`,
          [user.id, user.knownHwid, now, now, user.hwid !== ''],
          tx,
        );
        const finalised = await this.sql.run(
          `update license_keys
           set status = 'used', used_by = ?, user_id = ?, hwid = ?, ip = ?, expires_at = ?, pending_since = null
           where id = ? and status = 'pending' and pending_since = ?`,
          [user.username, user.id, user.knownHwid, user.ip, user.expiresAt, id, stamp],
          tx,
        );
        if (finalised === 0) throw new Rollback('state_changed');
      });
      return 'done';
    } catch (err) {
      if (err instanceof Rollback) return err.result;
      throw err;
    }
  }

  /** pending -> the status it had before the claim, only while the claim is still ours. */
  async release(id: string, previous: LicenseStatus, stamp: Date): Promise<void> {
    await this.sql.run(
      `update license_keys set status = ?, pending_since = null
       where id = ? and status = 'pending' and pending_since = ?`,
      [previous, id, stamp],
    );
  }

  /** unused -> used by a license-only activation; false when the key changed meanwhile. */
  async activateUnused(
    id: string,
    a: { hwid: string; ip: string; expiresAt: Date | null; now: Date },
  ): Promise<boolean> {
    return (
      (await this.sql.run(
        `update license_keys
       set status = 'used', used_by = 'license-only', hwid = ?, ip = ?, expires_at = ?, last_login = ?
       where id = ? and status = 'unused'`,
        [a.hwid, a.ip, a.expiresAt, a.now, id],
      )) === 1
    );
  }

  /** A used key's return: last login and IP, and its HWID when none is stored; false when it changed meanwhile. */
  async touchUsed(id: string, a: { hwid: string; ip: string; now: Date }): Promise<boolean> {
    return (
      (await this.sql.run(
        `update license_keys set last_login = ?, ip = ?, hwid = case when hwid = '' then ? else hwid end
         where id = ? and status = 'used'`,
        [a.now, a.ip, a.hwid, id],
      )) === 1
    );
  }

  /** The screenshot of the key's latest activation. */
  async setScreenshot(id: string, path: string): Promise<void> {
    await this.sql.run('update license_keys set screenshot_path = ? where id = ?', [path, id]);
  }

  /**
   * A claim whose process died between claim and finalise leaves a key pending: put it back to
   * the status it had before the claim. Returns how many keys were recovered.
   */
  recoverPending(pendingBefore: Date): Promise<number> {
    return this.sql.run(
      `update license_keys set status = case when used_by = '' then 'unused' else 'used' end, pending_since = null
       where status = 'pending' and (pending_since is null or pending_since <= ?)`,
      [pendingBefore],
    );
  }
}
