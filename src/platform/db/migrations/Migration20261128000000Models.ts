import { Migration } from '@mikro-orm/migrations';

// Licensing models (docs/protocol.md 12): devices per key and per end user (docs/spec.md's pinned HWID becomes the
// first bound device), the entitlement catalogue and the codes on keys, trials once per HWID (kept when the key
// goes), and the application fields of devices, trials, offline files and grace. Existing pins are carried
// over as bound devices, so every key and user keeps exactly the machine it was locked to.
export class Migration20261128000000Models extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "app_entitlements" ("app_id" uuid not null, "code" varchar(64) not null, "name" varchar(200) not null default '', "position" int not null, constraint "app_entitlements_pkey" primary key ("app_id", "code"));`,
    );
    this.addSql(
      `create table "key_devices" ("license_id" uuid not null, "hwid" varchar(256) not null, "first_seen" timestamptz not null, "last_seen" timestamptz not null, "bound" boolean not null default false, constraint "key_devices_pkey" primary key ("license_id", "hwid"));`,
    );
    this.addSql(
      `create table "trials" ("app_id" uuid not null, "hwid" varchar(256) not null, "license_id" uuid not null, "created_at" timestamptz not null, constraint "trials_pkey" primary key ("app_id", "hwid"));`,
    );
    this.addSql(
      `create table "user_devices" ("user_id" uuid not null, "hwid" varchar(256) not null, "first_seen" timestamptz not null, "last_seen" timestamptz not null, "bound" boolean not null default false, constraint "user_devices_pkey" primary key ("user_id", "hwid"));`,
    );
    this.addSql(
      `alter table "app_entitlements" add constraint "app_entitlements_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "key_devices" add constraint "key_devices_license_id_foreign" foreign key ("license_id") references "license_keys" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "trials" add constraint "trials_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "user_devices" add constraint "user_devices_user_id_foreign" foreign key ("user_id") references "end_users" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "applications" add column "max_devices" int not null default 1, add column "trial_hours" int not null default 0, add column "trial_level" int not null default 1, add column "offline_days" int not null default 0, add column "grace_hours" int not null default 0;`,
    );
    this.addSql(
      `alter table "license_keys" add column "max_devices" int null, add column "entitlements" jsonb not null default '[]';`,
    );
    this.addSql(
      `insert into "key_devices" ("license_id", "hwid", "first_seen", "last_seen", "bound") select "id", "hwid", coalesce("last_login", "created_at"), coalesce("last_login", "created_at"), true from "license_keys" where "hwid" <> '' and "used_by" = 'license-only';`,
    );
    this.addSql(
      `insert into "user_devices" ("user_id", "hwid", "first_seen", "last_seen", "bound") select u."id", h.value, coalesce(u."last_login", u."created_at"), coalesce(u."last_login", u."created_at"), h.value = u."hwid" from "end_users" u cross join lateral jsonb_array_elements_text(u."known_hwids") as h(value) on conflict do nothing;`,
    );
    this.addSql(
      `insert into "user_devices" ("user_id", "hwid", "first_seen", "last_seen", "bound") select "id", "hwid", coalesce("last_login", "created_at"), coalesce("last_login", "created_at"), true from "end_users" where "hwid" <> '' on conflict ("user_id", "hwid") do update set "bound" = true;`,
    );
  }
}
