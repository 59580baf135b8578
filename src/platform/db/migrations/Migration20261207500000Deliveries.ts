import { Migration } from '@mikro-orm/migrations';

// Webhook deliveries (docs/api.md "Webhook deliveries"): every attempt, kept 30 days, listed per
// account newest first.
export class Migration20261207500000Deliveries extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table if not exists "webhook_deliveries" ("id" bigserial primary key, "account_id" uuid not null, "app_id" uuid not null, "event" varchar(64) not null, "event_id" uuid not null, "url" varchar(4096) not null, "attempt" int not null, "status" int null, "error" varchar(200) null, "latency_ms" int not null, "response_excerpt" text not null, "content_type" varchar(200) not null, "body" bytea not null, "at" timestamptz not null);`,
    );
    this.addSql(
      `create index if not exists "webhook_deliveries_account_id_at_id_index" on "webhook_deliveries" ("account_id", "at", "id");`,
    );
    this.addSql(`create index if not exists "webhook_deliveries_at_index" on "webhook_deliveries" ("at");`);
  }
}
