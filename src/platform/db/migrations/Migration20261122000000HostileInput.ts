import { Migration } from '@mikro-orm/migrations';

// Hostile input: free text up to 4,096 characters (docs/protocol.md 11.18), blacklist uniqueness on a hash of the
// value (a long value cannot be a btree key), and the durable request-nonce ledger (docs/protocol.md 11.21).
export class Migration20261122000000HostileInput extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "applications" alter column "name" type varchar(4096) using ("name"::varchar(4096));`);

    this.addSql(`alter table "blacklist_entries" drop constraint "blacklist_entries_app_id_type_value_unique";`);
    this.addSql(`alter table "blacklist_entries" alter column "value" type text using ("value"::text);`);
    this.addSql(`alter table "blacklist_entries" add column "value_hash" varchar(64) null;`);
    this.addSql(`update "blacklist_entries" set "value_hash" = encode(sha256(convert_to("value", 'UTF8')), 'hex');`);
    this.addSql(`alter table "blacklist_entries" alter column "value_hash" set not null;`);
    this.addSql(
      `alter table "blacklist_entries" add constraint "blacklist_entries_app_id_type_value_hash_unique" unique ("app_id", "type", "value_hash");`,
    );

    this.addSql(
      `create table "request_nonces" ("app_id" uuid not null, "nonce" varchar(64) not null, "expires_at" timestamptz not null, constraint "request_nonces_pkey" primary key ("app_id", "nonce"));`,
    );
    this.addSql(`create index "request_nonces_expires_at_index" on "request_nonces" ("expires_at");`);
  }
}
