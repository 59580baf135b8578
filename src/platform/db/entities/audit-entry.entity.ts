import { EntitySchema } from '@mikro-orm/core';

export type AuditLevel = 'info' | 'warning' | 'error';

/** One audit-log line (docs/spec.md "Log entry"); `action` is a dotted event name such as `client.login`. */
export interface AuditEntry {
  id: string;
  appId: string | null;
  at: Date;
  level: AuditLevel;
  action: string;
  detail: string;
  ip: string;
  location: string;
  screen: string;
  actorId: string | null;
  /** Who the actor was when it acted (a later rename or deletion does not rewrite history). */
  actorUsername: string | null;
  actorRole: string | null;
  /** The API token the actor acted through, if any. */
  tokenId: string | null;
  /** The browser of a dashboard sign-in (auth.* entries only). */
  userAgent: string | null;
  resellerId: string | null;
}

export const AuditEntrySchema = new EntitySchema<AuditEntry>({
  name: 'AuditEntry',
  tableName: 'audit_log',
  indexes: [
    { properties: ['appId', 'id'] },
    // Listings run newest first by (at, id) with a cursor on that pair.
    { properties: ['appId', 'at', 'id'] },
    // The account audit (GET /api/audit) reads entries without an app by actor; client calls, which
    // are most of the log and have no actor, stay out of the index.
    {
      name: 'audit_log_account_actor_index',
      expression:
        'create index "audit_log_account_actor_index" on "audit_log" ("actor_id", "id") where "app_id" is null',
    },
  ],
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true },
    appId: {
      kind: 'm:1',
      entity: 'Application',
      mapToPk: true,
      fieldName: 'app_id',
      deleteRule: 'cascade',
      nullable: true,
    },
    at: { type: 'datetime' },
    level: { type: 'string', length: 8 },
    action: { type: 'string', length: 64 },
    detail: { type: 'text', default: '' },
    ip: { type: 'string', length: 64, default: '' },
    location: { type: 'text', default: '' },
    screen: { type: 'text', default: '' },
    actorId: { type: 'uuid', nullable: true },
    actorUsername: { type: 'string', length: 32, nullable: true },
    actorRole: { type: 'string', length: 16, nullable: true },
    tokenId: { type: 'uuid', nullable: true },
    userAgent: { type: 'string', length: 256, nullable: true },
    resellerId: { type: 'uuid', nullable: true },
  },
});
