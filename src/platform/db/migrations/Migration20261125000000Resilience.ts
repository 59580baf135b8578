import { Migration } from '@mikro-orm/migrations';

// A single process keeps its client and heartbeat sessions across a restart (process_state), and
// screenshots are stored by content with a per-owner history (screenshots).
export class Migration20261125000000Resilience extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "process_state" ("kind" varchar(16) not null, "key" text not null, "value" bytea not null, "expires_at" timestamptz not null, constraint "process_state_pkey" primary key ("kind", "key"));`,
    );
    this.addSql(`create index "process_state_expires_at_index" on "process_state" ("expires_at");`);
    this.addSql(
      `create table "screenshots" ("owner_id" uuid not null, "sha256" varchar(64) not null, "app_id" uuid not null, "ext" varchar(4) not null, "bytes" int not null, "at" timestamptz not null, constraint "screenshots_pkey" primary key ("owner_id", "sha256"));`,
    );
    this.addSql(`create index "screenshots_app_id_sha256_index" on "screenshots" ("app_id", "sha256");`);
    this.addSql(`create index "screenshots_at_index" on "screenshots" ("at");`);
    this.addSql(
      `alter table "screenshots" add constraint "screenshots_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
  }
}
