// The database side of license-key operations. Every state change is a conditional UPDATE
// (`... WHERE status = 'unused'`), so two claims cannot both win even in different processes;
// the actor in front of it only makes operations on one key take turns within a worker.
import { randomUUID } from 'node:crypto';
import type { LicenseStatus, DurationUnit } from '../entities/index.js';
import { toDate, type Sql } from '../sql.js';
import type { ActivateOp, EffectOutput, RegisterOp } from '../../actors/license.machine.js';
import { durationMs } from '../../services/license-keys.js';

interface KeyRow {
  id: string;
  status: LicenseStatus;
  used_by: string;
  user_id: string | null;
  hwid: string;
  level: number;
  duration_value: number;
  duration_unit: DurationUnit;
  expires_at: Date | string | null;
  reseller_id: string | null;
}

const KEY_COLUMNS = 'id, status, used_by, user_id, hwid, level, duration_value, duration_unit, expires_at, reseller_id';

/** A used key whose user was deleted can be registered again (PROTOCOL 11.10). */
const CLAIMABLE = `(status = 'unused' or (status = 'used' and user_id is null and used_by not in ('', 'license-only')))`;

function isClaimable(k: KeyRow): boolean {
  return k.status === 'unused' || (k.status === 'used' && k.user_id === null && k.used_by !== '' && k.used_by !== 'license-only');
}

function expiryFrom(k: KeyRow, now: number): Date | null {
  const ms = durationMs(k.duration_value, k.duration_unit);
  return ms === null ? null : new Date(now + ms);
}

class UsernameTaken extends Error {}
class StateChanged extends Error {}

export interface LicenseOpsOptions {
  now: () => number;
  /** Test-only fault injection (FAULT_AFTER_CLAIM_MS): pause between claim and finalise. */
  afterClaim?: () => Promise<void>;
}

export class LicenseOpsRepository {
  constructor(private readonly sql: Sql, private readonly opts: LicenseOpsOptions) {}

  /** Finds a key of an app by its keyed hash: the id its actor is keyed by. */
  async idByHash(appId: string, keyHash: string): Promise<string | undefined> {
    return (await this.sql.one<{ id: string }>('select id from license_keys where app_id = ? and key_hash = ?', [appId, keyHash]))?.id;
  }

  private load(id: string): Promise<KeyRow | undefined> {
    return this.sql.one<KeyRow>(`select ${KEY_COLUMNS} from license_keys where id = ?`, [id]);
  }

  /** register: claim (-> pending), create the user and finalise (-> used) in one transaction, or roll the claim back. */
  async register(licenseId: string, op: RegisterOp): Promise<EffectOutput> {
    const key = await this.load(licenseId);
    if (!key) return { ok: false, status: 'unknown', code: 'license_invalid' };
    if (key.status === 'banned') return { ok: false, status: 'banned', code: 'license_banned' };
    if (!isClaimable(key)) return { ok: false, status: key.status, code: 'license_used' };

    const stamp = new Date(this.opts.now());
    const claimed = await this.sql.run(`update license_keys set status = 'pending', pending_since = ? where id = ? and ${CLAIMABLE}`, [stamp, licenseId]);
    if (claimed === 0) return { ok: false, status: 'unknown', code: 'license_used' };

    try {
      await this.opts.afterClaim?.();
      const now = this.opts.now();
      const expiresAt = toDate(key.expires_at) ?? expiryFrom(key, now);
      const userId = randomUUID();
      await this.sql.transaction(async (tx) => {
        const inserted = await this.sql.one(
          `insert into end_users (id, app_id, username, password_hash, created_at, last_login, ip, hwid, known_hwids, level, expires_at,
             banned, license_id, reseller_id)
           values (?, ?, ?, ?, ?, null, ?, ?, jsonb_build_array(?::text), ?, ?, false, ?, ?)
           on conflict (app_id, username) do nothing returning id`,
          [userId, op.appId, op.username, op.passwordHash, new Date(now), op.ip, op.hwidLock ? op.hwid : '', op.hwid, key.level,
            expiresAt, licenseId, key.reseller_id],
          tx,
        );
        if (!inserted) throw new UsernameTaken();
        const finalised = await this.sql.run(
          `update license_keys set status = 'used', used_by = ?, user_id = ?, hwid = ?, ip = ?, expires_at = ?, pending_since = null
           where id = ? and status = 'pending' and pending_since = ?`,
          [op.username, userId, op.hwid, op.ip, expiresAt, licenseId, stamp],
          tx,
        );
        if (finalised === 0) throw new StateChanged();
      });
      return { ok: true, status: 'used', value: { userId, username: op.username, level: key.level, expiresAt: expiresAt?.toISOString() ?? null, resellerId: key.reseller_id } };
    } catch (err) {
      // SPEC: the claim is left alone when its state changed under us; any other failure resets it.
      if (err instanceof StateChanged) return { ok: false, status: 'unknown', code: 'license_state_changed' };
      await this.sql.run(`update license_keys set status = ?, pending_since = null where id = ? and status = 'pending' and pending_since = ?`,
        [key.status, licenseId, stamp]);
      if (err instanceof UsernameTaken) return { ok: false, status: key.status, code: 'username_taken' };
      throw err;
    }
  }

  /** license-only: unused -> used (stamping expiry, hwid, used_by), or a check of a used key. */
  async activate(licenseId: string, op: ActivateOp): Promise<EffectOutput> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const key = await this.load(licenseId);
      if (!key) return { ok: false, status: 'unknown', code: 'license_invalid' };
      if (key.status === 'banned') return { ok: false, status: 'banned', code: 'license_banned' };
      if (key.status === 'pending') return { ok: false, status: 'pending', code: 'license_in_progress' };
      if (key.status !== 'unused' && key.status !== 'used') return { ok: false, status: key.status, code: 'license_not_valid' };
      const now = this.opts.now();
      if (key.status === 'unused') {
        const expiresAt = expiryFrom(key, now);
        const done = await this.sql.run(
          `update license_keys set status = 'used', used_by = 'license-only', hwid = ?, ip = ?, expires_at = ?, last_login = ?
           where id = ? and status = 'unused'`,
          [op.hwid, op.ip, expiresAt, new Date(now), licenseId],
        );
        if (done === 0) continue; // changed under us: read again
        return { ok: true, status: 'used', value: { level: key.level, expiresAt: expiresAt?.toISOString() ?? null, resellerId: key.reseller_id, newDevice: true } };
      }
      if (op.hwidLock && key.hwid !== '' && key.hwid !== op.hwid) return { ok: false, status: 'used', code: 'hwid_mismatch' };
      const expiresAt = toDate(key.expires_at);
      if (expiresAt && expiresAt.getTime() < now) return { ok: false, status: 'used', code: 'license_expired' };
      const done = await this.sql.run(
        `update license_keys set last_login = ?, ip = ?, hwid = case when hwid = '' then ? else hwid end where id = ? and status = 'used'`,
        [new Date(now), op.ip, op.hwid, licenseId],
      );
      if (done === 0) continue;
      return { ok: true, status: 'used', value: { level: key.level, expiresAt: expiresAt?.toISOString() ?? null, resellerId: key.reseller_id, newDevice: key.hwid !== op.hwid } };
    }
    return { ok: false, status: 'unknown', code: 'license_in_progress' };
  }

  /**
   * A claim whose process died between claim and finalise leaves a key pending: put it back to
   * the status it had before the claim. Returns how many keys were recovered.
   */
  recoverPending(olderThanMs: number): Promise<number> {
    return this.sql.run(
      `update license_keys set status = case when used_by = '' then 'unused' else 'used' end, pending_since = null
       where status = 'pending' and (pending_since is null or pending_since <= ?)`,
      [new Date(this.opts.now() - olderThanMs)],
    );
  }
}
