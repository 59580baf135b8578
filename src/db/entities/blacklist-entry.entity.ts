import { EntitySchema } from '@mikro-orm/core';

export type BlacklistType = 'ip' | 'hwid';

export interface BlacklistEntry {
  id: string;
  appId: string;
  type: BlacklistType;
  value: string;
  createdAt: Date;
  createdBy: string | null;
}

export const BlacklistEntrySchema = new EntitySchema<BlacklistEntry>({
  name: 'BlacklistEntry',
  tableName: 'blacklist_entries',
  uniques: [{ properties: ['appId', 'type', 'value'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    type: { type: 'string', length: 4 },
    value: { type: 'string', length: 256 },
    createdAt: { type: 'datetime' },
    createdBy: { type: 'uuid', nullable: true },
  },
});
