import { Migration } from '@mikro-orm/migrations';

// Bulk jobs over keys (docs/api.md "Bulk jobs"): one row per job, its progress written per chunk.
export class Migration20261207510000Jobs extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table if not exists "jobs" ("id" uuid not null, "app_id" uuid not null, "creator_id" uuid not null, "action" varchar(16) not null, "params" jsonb not null, "status" varchar(16) not null, "total" int not null, "done" int not null, "succeeded" int not null, "skipped" int not null, "skipped_keys" jsonb not null, "cancel_requested" boolean not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "jobs_pkey" primary key ("id"));`,
    );
    this.addSql(`create index if not exists "jobs_created_at_index" on "jobs" ("created_at");`);
  }
}
