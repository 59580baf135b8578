import { Migration } from '@mikro-orm/migrations';

// Security, round three. The expiry watch (docs/protocol.md "Expiry while running") reads the keys and end users whose expiry
// has just passed, twice a second: both expiries are indexed so that read stays a short range scan.
export class Migration20261207000000Security extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index if not exists "license_keys_expires_at_index" on "license_keys" ("expires_at");`);
    this.addSql(`create index if not exists "end_users_expires_at_index" on "end_users" ("expires_at");`);
    // Audit entries outlive their actors: what is kept of a deleted member (team.repository.ts).
    this.addSql(
      `create table if not exists "deleted_accounts" ("id" uuid not null, "username" varchar(64) not null, "role" varchar(16) not null, "ancestor_ids" jsonb not null, "deleted_at" timestamptz not null, constraint "deleted_accounts_pkey" primary key ("id"));`,
    );
  }
}
