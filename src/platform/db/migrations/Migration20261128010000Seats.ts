import { Migration } from '@mikro-orm/migrations';

// Floating seats (docs/protocol.md 12.2): an application's bound on concurrent heartbeat sessions per key and
// what a start over it does; a key's own bound (null: the application's).
export class Migration20261128010000Seats extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "applications" add column "max_sessions" int not null default 0, add column "session_overflow" varchar(16) not null default 'reject';`,
    );
    this.addSql(`alter table "license_keys" add column "max_sessions" int null;`);
  }
}
