import { Migration } from '@mikro-orm/migrations';

// Releases and updates (docs/releases.md): releases of an application on channels, their artifacts
// (files under ARTIFACT_DIR, addressed by id), the hourly marks that keep `release.download` audit
// lines to one per key, artifact and hour, and the application's `expired_updates` rule.
export class Migration20261207100000Releases extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "applications" add column if not exists "expired_updates" varchar(16) not null default 'none';`,
    );
    this.addSql(
      `create table if not exists "releases" ("id" uuid not null, "app_id" uuid not null, "version" varchar(255) not null, "channel" varchar(8) not null, "notes" text not null default '', "entitlements" jsonb not null default '[]', "status" varchar(16) not null default 'draft', "created_by" uuid null, "created_at" timestamptz not null, "published_at" timestamptz null, "yanked_at" timestamptz null, constraint "releases_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "releases" add constraint "releases_app_id_version_unique" unique ("app_id", "version");`);
    this.addSql(`create index if not exists "releases_app_id_status_index" on "releases" ("app_id", "status");`);
    this.addSql(
      `alter table "releases" add constraint "releases_app_id_foreign" foreign key ("app_id") references "applications" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `create table if not exists "release_artifacts" ("id" uuid not null, "release_id" uuid not null, "filename" varchar(255) not null, "platform" varchar(32) not null, "arch" varchar(32) not null, "size" bigint not null, "sha256" varchar(64) not null, "sha512" varchar(128) not null, "signature" text not null, "kid" varchar(64) not null, "downloads" bigint not null default 0, "created_at" timestamptz not null, constraint "release_artifacts_pkey" primary key ("id"));`,
    );
    this.addSql(
      `alter table "release_artifacts" add constraint "release_artifacts_release_id_filename_unique" unique ("release_id", "filename");`,
    );
    this.addSql(
      `alter table "release_artifacts" add constraint "release_artifacts_release_id_foreign" foreign key ("release_id") references "releases" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `create table if not exists "release_download_marks" ("artifact_id" uuid not null, "license_id" uuid not null, "hour" timestamptz not null, constraint "release_download_marks_pkey" primary key ("artifact_id", "license_id", "hour"));`,
    );
    this.addSql(
      `alter table "release_download_marks" add constraint "release_download_marks_artifact_id_foreign" foreign key ("artifact_id") references "release_artifacts" ("id") on update cascade on delete cascade;`,
    );
  }
}
