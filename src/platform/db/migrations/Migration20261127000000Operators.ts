import { Migration } from '@mikro-orm/migrations';

// Operators (docs/protocol.md 13): API tokens, two-factor sign-in (sealed secrets, recovery codes, the owner's
// policy), who did what on audit entries, and the browser of each dashboard session.
export class Migration20261127000000Operators extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "api_tokens" ("id" uuid not null, "account_id" uuid not null, "name" varchar(100) not null, "token_hash" varchar(64) not null, "scopes" jsonb not null, "app_ids" jsonb null, "expires_at" timestamptz null, "created_at" timestamptz not null, "last_used_at" timestamptz null, "last_used_ip" varchar(64) not null default '', constraint "api_tokens_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "api_tokens_account_id_index" on "api_tokens" ("account_id");`);
    this.addSql(`alter table "api_tokens" add constraint "api_tokens_token_hash_unique" unique ("token_hash");`);
    this.addSql(
      `alter table "api_tokens" add constraint "api_tokens_account_id_foreign" foreign key ("account_id") references "accounts" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `create table "two_factor_recovery_codes" ("account_id" uuid not null, "code_hash" varchar(64) not null, "used_at" timestamptz null, constraint "two_factor_recovery_codes_pkey" primary key ("account_id", "code_hash"));`,
    );
    this.addSql(
      `alter table "two_factor_recovery_codes" add constraint "two_factor_recovery_codes_account_id_foreign" foreign key ("account_id") references "accounts" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "accounts" add column "two_factor_secret" text null, add column "two_factor_pending" text null, add column "two_factor_last_step" int null, add column "require_two_factor" boolean not null default false;`,
    );
    this.addSql(
      `alter table "audit_log" add column "actor_username" varchar(32) null, add column "actor_role" varchar(16) null, add column "token_id" uuid null, add column "user_agent" varchar(256) null;`,
    );
    this.addSql(
      `create index "audit_log_account_actor_index" on "audit_log" ("actor_id", "id") where "app_id" is null;`,
    );
    this.addSql(`alter table "dashboard_sessions" add column "user_agent" varchar(256) not null default '';`);
  }
}
