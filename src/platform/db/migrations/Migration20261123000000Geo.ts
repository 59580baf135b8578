import { Migration } from '@mikro-orm/migrations';

// Geo and alerts: a license key remembers the countries it was used from (the "new location"
// alert for license-only keys) and where it was used last, beside its activation geo.
export class Migration20261123000000Geo extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "license_keys" add column "known_countries" jsonb not null default '[]', add column "last_geo" jsonb null;`,
    );
  }
}
