import type { Sql } from '../../platform/db/sql.js';

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
         u.known_hwids, k.status as key_status
       from end_users u left join license_keys k on k.id = u.license_id
       where u.app_id = ? and u.username = ?`,
      [appId, username],
    );
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
