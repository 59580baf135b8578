import { Migration } from '@mikro-orm/migrations';

// Many hosts: the keyed fingerprints of the keys every host of a deployment must share, recorded by
// the first host to start, so a host started with other keys refuses to start (key-fingerprints.ts).
export class Migration20261128030000Hosts extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "deployment_keys" ("name" varchar(64) not null, "fingerprint" varchar(64) not null, "created_at" timestamptz not null, constraint "deployment_keys_pkey" primary key ("name"));`,
    );
  }
}
