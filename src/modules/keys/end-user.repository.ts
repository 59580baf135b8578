import { toDate, type Sql } from '../../platform/db/sql.js';

/** What login needs about a user and the key it was registered with, in one query. */
interface LoginRow {
  id: string;
  password_hash: string;
  banned: boolean;
  expires_at: Date | string | null;
  hwid: string;
  level: number;
  reseller_id: string | null;
  license_id: string | null;
  /** null when the key was deleted. */
  key_status: string | null;
  known_hwids: string[];
  /** The key's own max_devices (null: the application's) and entitlement codes. */
  key_max_devices: number | null;
  entitlements: string[] | null;
}

export class EndUserRepository {
  constructor(private readonly sql: Sql) {}

  /** A user's screenshot paths: the activation's (register) or the latest login's; screenshot_path is the newest. */
  async setScreenshot(userId: string, kind: 'activation' | 'last', path: string): Promise<void> {
    const column = kind === 'activation' ? 'activation_screenshot_path' : 'last_screenshot_path';
    await this.sql.run(`update end_users set ${column} = ?, screenshot_path = ? where id = ?`, [path, path, userId]);
  }

  findForLogin(appId: string, username: string): Promise<LoginRow | undefined> {
    return this.sql.one<LoginRow>(
      `select u.id, u.password_hash, u.banned, u.expires_at, u.hwid, u.level, u.reseller_id, u.license_id,
         u.known_hwids, k.status as key_status, k.max_devices as key_max_devices, k.entitlements
       from end_users u left join license_keys k on k.id = u.license_id
       where u.app_id = ? and u.username = ?`,
      [appId, username],
    );
  }

  /** Users (not banned) whose own expiry fell in [from, to): the expiry watch's read (heartbeat/expiry-watch.ts). */
  async expiredBetween(from: Date, to: Date, limit: number) {
    const rows = await this.sql.all<{
      id: string;
      app_id: string;
      reseller_id: string | null;
      expires_at: Date | string;
    }>(
      `select id, app_id, reseller_id, expires_at from end_users
       where expires_at >= ? and expires_at < ? and not banned order by expires_at limit ?`,
      [from, to, limit],
    );
    return rows.map((r) => ({ ...r, expires_at: new Date(r.expires_at) }));
  }

  /** What an end user's offline file and grace are made of. */
  async grantOf(userId: string): Promise<{ banned: boolean; level: number; expiresAt: Date | null } | undefined> {
    const u = await this.sql.one<{ banned: boolean; level: number; expires_at: Date | string | null }>(
      'select banned, level, expires_at from end_users where id = ?',
      [userId],
    );
    return u && { banned: u.banned, level: u.level, expiresAt: toDate(u.expires_at) };
  }

  /** A successful login: last_login, IP, the HWID pin when asked, known HWIDs; and the key's last use. */
  async recordLogin(u: LoginRow, ip: string, hwid: string, pinHwid: boolean, now: Date): Promise<void> {
    await this.sql.run(
      `update end_users set last_login = ?, ip = ?, hwid = case when ? then ? else hwid end,
         known_hwids = case when known_hwids @> jsonb_build_array(?::text) then known_hwids
                            else known_hwids || jsonb_build_array(?::text) end
       where id = ?`,
      [now, ip, pinHwid, hwid, hwid, hwid, u.id],
    );
    if (u.license_id)
      await this.sql.run('update license_keys set last_login = ?, ip = ? where id = ?', [now, ip, u.license_id]);
  }
}
