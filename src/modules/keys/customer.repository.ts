// A customer's own key and end user, as the customer portal reads and changes them (docs/protocol.md
// 14.1-14.3): found by the key's keyed hash or by name, a password set, every device cleared.
import type { Sql } from '../../platform/db/sql.js';
import { LICENSE_COLUMNS, type LicenseRow } from './license.repository.js';
/** An end user as a customer signs in with it (the portal). */
export interface EndUserRow {
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

const USER_COLUMNS = `id, app_id, username, password_hash, hwid, banned, license_id, created_at, last_login,
  reseller_id`;

export class CustomerRepository {
  constructor(private readonly sql: Sql) {}

  licenseByHash(appId: string, keyHash: string): Promise<LicenseRow | undefined> {
    return this.sql.one<LicenseRow>(`select ${LICENSE_COLUMNS} from license_keys where app_id = ? and key_hash = ?`, [
      appId,
      keyHash,
    ]);
  }

  license(id: string): Promise<LicenseRow | undefined> {
    return this.sql.one<LicenseRow>(`select ${LICENSE_COLUMNS} from license_keys where id = ?`, [id]);
  }

  userByName(appId: string, username: string): Promise<EndUserRow | undefined> {
    return this.sql.one<EndUserRow>(`select ${USER_COLUMNS} from end_users where app_id = ? and username = ?`, [
      appId,
      username,
    ]);
  }

  user(id: string): Promise<EndUserRow | undefined> {
    return this.sql.one<EndUserRow>(`select ${USER_COLUMNS} from end_users where id = ?`, [id]);
  }

  async setPassword(userId: string, hash: string): Promise<void> {
    await this.sql.run('update end_users set password_hash = ? where id = ?', [hash, userId]);
  }

  /** Every device of the key and of its end user, and both HWIDs, cleared inside the caller's transaction. */
  async clearDevices(licenseId: string, tx: unknown): Promise<void> {
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
  }
}
