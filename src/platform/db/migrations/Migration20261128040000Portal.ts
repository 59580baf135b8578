import { Migration } from '@mikro-orm/migrations';

// Customer portal and order fulfilment (docs/protocol.md 14): the portal settings of an application, products
// with their sealed webhook secrets, orders (one per provider event), portal sign-ins and reset cooldowns.
export class Migration20261128040000Portal extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "applications" add column "portal_enabled" boolean not null default false, add column "portal_reset_cooldown_hours" int not null default 24;`,
    );
    this.addSql(
      `create table "products" ("id" uuid not null, "app_id" uuid not null, "name" varchar(4096) not null, "duration_value" int not null, "duration_unit" varchar(8) not null, "level" int not null default 1, "mask" varchar(128) not null, "alphabet" varchar(256) not null, "entitlements" jsonb not null default '[]', "note" text not null default '', "webhook_secret" text not null, "created_by" uuid null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "products_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "products_app_id_index" on "products" ("app_id");`);
    this.addSql(
      `alter table "products" add constraint "products_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `create table "orders" ("id" uuid not null, "app_id" uuid not null, "product_id" uuid null, "product_name" varchar(4096) not null, "provider" varchar(16) not null, "external_id" varchar(255) not null, "event_id" varchar(300) not null, "email" varchar(320) not null default '', "license_ids" jsonb not null default '[]', "keys_sealed" text null, "keys_until" timestamptz not null, "created_at" timestamptz not null, constraint "orders_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "orders_app_id_created_at_index" on "orders" ("app_id", "created_at");`);
    this.addSql(`create index "orders_provider_external_id_index" on "orders" ("provider", "external_id");`);
    this.addSql(
      `alter table "orders" add constraint "orders_provider_event_id_unique" unique ("provider", "event_id");`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_product_id_foreign" foreign key ("product_id") references "products" ("id") on update cascade on delete set null;`,
    );
    this.addSql(
      `create table "portal_sessions" ("token_hash" varchar(64) not null, "app_id" uuid not null, "license_id" uuid not null, "user_id" uuid null, "created_at" timestamptz not null, "expires_at" timestamptz not null, constraint "portal_sessions_pkey" primary key ("token_hash"));`,
    );
    this.addSql(`create index "portal_sessions_license_id_index" on "portal_sessions" ("license_id");`);
    this.addSql(`create index "portal_sessions_expires_at_index" on "portal_sessions" ("expires_at");`);
    this.addSql(
      `alter table "portal_sessions" add constraint "portal_sessions_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "portal_sessions" add constraint "portal_sessions_license_id_foreign" foreign key ("license_id") references "license_keys" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `create table "portal_resets" ("license_id" uuid not null, "reset_at" timestamptz not null, constraint "portal_resets_pkey" primary key ("license_id"));`,
    );
    this.addSql(
      `alter table "portal_resets" add constraint "portal_resets_license_id_foreign" foreign key ("license_id") references "license_keys" ("id") on update cascade on delete cascade;`,
    );
  }
}
