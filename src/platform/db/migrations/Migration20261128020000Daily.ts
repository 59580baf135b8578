import { Migration } from '@mikro-orm/migrations';

// Daily work at scale (docs/protocol.md 15): the audit log's (at, id) listing order, a reason on blacklist
// entries.
export class Migration20261128020000Daily extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "audit_log_app_id_at_id_index" on "audit_log" ("app_id", "at", "id");`);
    this.addSql(`alter table "blacklist_entries" add column "reason" varchar(500) not null default '';`);
  }
}
