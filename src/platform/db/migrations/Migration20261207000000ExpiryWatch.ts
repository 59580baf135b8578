import { Migration } from '@mikro-orm/migrations';

// The expiry watch (docs/protocol.md "Expiry while running") reads the keys and end users whose expiry
// has just passed, twice a second: both expiries are indexed so that read stays a short range scan.
export class Migration20261207000000ExpiryWatch extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index if not exists "license_keys_expires_at_index" on "license_keys" ("expires_at");`);
    this.addSql(`create index if not exists "end_users_expires_at_index" on "end_users" ("expires_at");`);
  }
}
