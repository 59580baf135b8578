import { Migration } from '@mikro-orm/migrations';

// Initial schema, generated from the EntitySchema definitions (scripts/schema-sql.ts) and committed.
// test/integration/schema.test.ts proves that entities and migrations still describe the same schema.
export class Migration20261121000000Initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "accounts" ("id" uuid not null, "username" varchar(32) not null, "display_name" varchar(100) not null default '', "email" varchar(254) null, "role" varchar(16) not null, "parent_id" uuid null, "owner_id" uuid not null, "enabled" boolean not null default true, "allowed_apps" jsonb not null default '[]', "key_quota" int null, "notes" text not null default '', "permissions" jsonb not null, "subscription_expires_at" timestamptz null, "password_hash" text not null, "webhook" text not null default '', "webhook_secret" varchar(64) not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "accounts_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "accounts" add constraint "accounts_username_unique" unique ("username");`);
    this.addSql(`alter table "accounts" add constraint "accounts_email_unique" unique ("email");`);
    this.addSql(`create index "accounts_parent_id_index" on "accounts" ("parent_id");`);
    this.addSql(`create index "accounts_owner_id_index" on "accounts" ("owner_id");`);
    this.addSql(
      `create table "applications" ("id" uuid not null, "owner_id" uuid not null, "name" varchar(100) not null, "version" varchar(64) not null default '1.0', "description" text not null default '', "enabled" boolean not null default true, "disabled_message" text not null default '', "keys_paused" boolean not null default false, "hwid_lock" boolean not null default false, "require_signature" boolean not null default false, "injection_detection" boolean not null default true, "require_heartbeat" boolean not null default false, "force_update" boolean not null default false, "update_url" text not null default '', "update_message" text not null default '', "force_encryption" boolean not null default false, "hash_check" boolean not null default false, "expected_binary_hash" varchar(128) not null default '', "webhook" text not null default '', "key_costs" jsonb not null default '{}', "allowed_hashes" jsonb not null default '[]', "heartbeat_interval" int not null default 30, "api_key" varchar(64) not null, "api_secret" varchar(128) not null, "created_by" uuid null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "applications_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "applications_owner_id_index" on "applications" ("owner_id");`);
    this.addSql(`alter table "applications" add constraint "applications_api_key_unique" unique ("api_key");`);
    this.addSql(
      `create table "audit_log" ("id" bigserial primary key, "app_id" uuid null, "at" timestamptz not null, "level" varchar(8) not null, "action" varchar(64) not null, "detail" text not null default '', "ip" varchar(64) not null default '', "location" text not null default '', "screen" text not null default '', "actor_id" uuid null, "reseller_id" uuid null);`,
    );
    this.addSql(`create index "audit_log_app_id_id_index" on "audit_log" ("app_id", "id");`);
    this.addSql(
      `create table "blacklist_entries" ("id" uuid not null, "app_id" uuid not null, "type" varchar(4) not null, "value" varchar(256) not null, "created_at" timestamptz not null, "created_by" uuid null, constraint "blacklist_entries_pkey" primary key ("id"));`,
    );
    this.addSql(
      `alter table "blacklist_entries" add constraint "blacklist_entries_app_id_type_value_unique" unique ("app_id", "type", "value");`,
    );
    this.addSql(
      `create table "dashboard_sessions" ("id" uuid not null, "account_id" uuid not null, "token_hash" varchar(64) not null, "created_at" timestamptz not null, "expires_at" timestamptz not null, "last_seen_at" timestamptz not null, "ip" varchar(64) not null default '', constraint "dashboard_sessions_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "dashboard_sessions_account_id_index" on "dashboard_sessions" ("account_id");`);
    this.addSql(
      `alter table "dashboard_sessions" add constraint "dashboard_sessions_token_hash_unique" unique ("token_hash");`,
    );
    this.addSql(
      `create table "end_users" ("id" uuid not null, "app_id" uuid not null, "username" varchar(64) not null, "password_hash" text not null, "created_at" timestamptz not null, "last_login" timestamptz null, "ip" varchar(64) not null default '', "hwid" varchar(256) not null default '', "known_hwids" jsonb not null default '[]', "known_countries" jsonb not null default '[]', "level" int not null default 1, "expires_at" timestamptz null, "banned" boolean not null default false, "license_id" uuid null, "reseller_id" uuid null, "last_geo" jsonb null, "geo" jsonb null, "activation_geo" jsonb null, "last_screenshot_path" text not null default '', "activation_screenshot_path" text not null default '', "screenshot_path" text not null default '', constraint "end_users_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "end_users_license_id_index" on "end_users" ("license_id");`);
    this.addSql(`create index "end_users_reseller_id_index" on "end_users" ("reseller_id");`);
    this.addSql(`create index "end_users_app_id_created_at_index" on "end_users" ("app_id", "created_at");`);
    this.addSql(
      `alter table "end_users" add constraint "end_users_app_id_username_unique" unique ("app_id", "username");`,
    );
    this.addSql(
      `create table "license_keys" ("id" uuid not null, "app_id" uuid not null, "key_hash" varchar(64) not null, "key_preview" varchar(16) not null, "status" varchar(10) not null default 'unused', "used_by" varchar(64) not null default '', "user_id" uuid null, "hwid" varchar(256) not null default '', "ip" varchar(64) not null default '', "level" int not null default 1, "duration_value" int not null, "duration_unit" varchar(8) not null, "duration_days" int not null, "created_at" timestamptz not null, "last_login" timestamptz null, "expires_at" timestamptz null, "pending_since" timestamptz null, "note" text not null default '', "reseller_id" uuid null, "created_by" uuid null, "activation_geo" jsonb null, "screenshot_path" text not null default '', constraint "license_keys_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "license_keys_reseller_id_index" on "license_keys" ("reseller_id");`);
    this.addSql(`create index "license_keys_app_id_created_at_index" on "license_keys" ("app_id", "created_at");`);
    this.addSql(
      `create index "license_keys_status_pending_since_index" on "license_keys" ("status", "pending_since");`,
    );
    this.addSql(
      `alter table "license_keys" add constraint "license_keys_app_id_key_hash_unique" unique ("app_id", "key_hash");`,
    );
    this.addSql(
      `alter table "applications" add constraint "applications_owner_id_foreign" foreign key ("owner_id") references "accounts" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "audit_log" add constraint "audit_log_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "blacklist_entries" add constraint "blacklist_entries_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "dashboard_sessions" add constraint "dashboard_sessions_account_id_foreign" foreign key ("account_id") references "accounts" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "end_users" add constraint "end_users_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "license_keys" add constraint "license_keys_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    for (const t of [
      'audit_log',
      'blacklist_entries',
      'dashboard_sessions',
      'end_users',
      'license_keys',
      'applications',
      'accounts',
    ]) {
      this.addSql(`drop table if exists "${t}" cascade;`);
    }
  }
}
