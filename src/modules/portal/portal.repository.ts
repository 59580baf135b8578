// What the customer portal reads and writes (PROTOCOL 14.1-14.3): sign-ins (the token's SHA-256),
// the customer's key and end user, the device reset with its cooldown claimed atomically.
import type { Sql } from '../../platform/db/sql.js';

export interface PortalApp {
  id: string;
  name: string;
  portal_enabled: boolean;
  portal_reset_cooldown_hours: number;
  max_devices: number;
  hwid_lock: boolean;
  offline_days: number;
  /** SPEC's pause of license validation: portal writes are refused while it is on (PROTOCOL 11.34). */
  keys_paused: boolean;
}

export interface PortalLicense {
  id: string;
  app_id: string;
  key_preview: string;
  status: string;
  used_by: string;
  user_id: string | null;
  hwid: string;
  level: number;
  duration_days: number;
  expires_at: Date | string | null;
  last_login: Date | string | null;
  created_at: Date | string;
  reseller_id: string | null;
  /** The key's own device limit (PROTOCOL 12.1); null: the application's. */
  max_devices: number | null;
  entitlements: string[];
}

export interface PortalUser {
  id: string;
  app_id: string;
  username: string;
  password_hash: string;
  hwid: string;
  banned: boolean;
  license_id: string | null;
  created_at: Date | string;
  last_login: Date | string | null;
  reseller_id: string | null;
}

export interface PortalSessionRow {
  app_id: string;
  license_id: string;
  user_id: string | null;
}

const LICENSE_COLUMNS = `id, app_id, key_preview, status, used_by, user_id, hwid, level, duration_days, expires_at,
  last_login, created_at, reseller_id, max_devices, entitlements`;
const USER_COLUMNS = `id, app_id, username, password_hash, hwid, banned, license_id, created_at, last_login,
  reseller_id`;
const APP_COLUMNS =
  'id, name, portal_enabled, portal_reset_cooldown_hours, max_devices, hwid_lock, offline_days, keys_paused';

export class PortalRepository {
  constructor(private readonly sql: Sql) {}

  appByApiKey(apiKey: string): Promise<PortalApp | undefined> {
    return this.sql.one<PortalApp>(`select ${APP_COLUMNS} from applications where api_key = ?`, [apiKey]);
  }

  appById(id: string): Promise<PortalApp | undefined> {
    return this.sql.one<PortalApp>(`select ${APP_COLUMNS} from applications where id = ?`, [id]);
  }

  licenseByHash(appId: string, keyHash: string): Promise<PortalLicense | undefined> {
    return this.sql.one<PortalLicense>(
      `select ${LICENSE_COLUMNS} from license_keys where app_id = ? and key_hash = ?`,
      [appId, keyHash],
    );
  }

  license(id: string): Promise<PortalLicense | undefined> {
    return this.sql.one<PortalLicense>(`select ${LICENSE_COLUMNS} from license_keys where id = ?`, [id]);
  }

  userByName(appId: string, username: string): Promise<PortalUser | undefined> {
    return this.sql.one<PortalUser>(`select ${USER_COLUMNS} from end_users where app_id = ? and username = ?`, [
      appId,
      username,
    ]);
  }

  user(id: string): Promise<PortalUser | undefined> {
    return this.sql.one<PortalUser>(`select ${USER_COLUMNS} from end_users where id = ?`, [id]);
  }

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
      await this.sql.run('delete from key_devices where license_id = ?', [licenseId], tx);
      await this.sql.run(
        'delete from user_devices where user_id in (select id from end_users where license_id = ?)',
        [licenseId],
        tx,
      );
      await this.sql.run(`update license_keys set hwid = '' where id = ?`, [licenseId], tx);
      await this.sql.run(
        `update end_users set hwid = '', known_hwids = '[]'::jsonb where license_id = ?`,
        [licenseId],
        tx,
      );
      return true;
    });
  }

  async setPassword(userId: string, hash: string): Promise<void> {
    await this.sql.run('update end_users set password_hash = ? where id = ?', [hash, userId]);
  }
}
