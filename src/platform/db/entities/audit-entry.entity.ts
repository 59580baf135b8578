import { EntitySchema } from '@mikro-orm/core';

export type AuditLevel = 'info' | 'warning' | 'error';

/** One audit-log line (SPEC "Log entry"); `action` is a dotted event name such as `client.login`. */
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
  resellerId: string | null;
}

export const AuditEntrySchema = new EntitySchema<AuditEntry>({
  name: 'AuditEntry',
  tableName: 'audit_log',
  indexes: [{ properties: ['appId', 'id'] }],
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
    resellerId: { type: 'uuid', nullable: true },
  },
});
