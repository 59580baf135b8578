import { Migration } from '@mikro-orm/migrations';

// Accepted heartbeats per application, reseller ('' for none) and UTC hour: what the beats chart reads.
// Workers add their in-memory counts with one upsert each flush; the rows go with their application.
export class Migration20261128050000Beats extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "beat_counts" ("app_id" uuid not null, "reseller_id" varchar(36) not null, "hour" timestamptz not null, "beats" bigint not null, constraint "beat_counts_pkey" primary key ("app_id", "reseller_id", "hour"));`,
    );
    this.addSql(
      `alter table "beat_counts" add constraint "beat_counts_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
  }
}
