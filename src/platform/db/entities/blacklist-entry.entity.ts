import { EntitySchema } from '@mikro-orm/core';

export type BlacklistType = 'ip' | 'hwid';

export interface BlacklistEntry {
  id: string;
  appId: string;
  type: BlacklistType;
  value: string;
  /** SHA-256 (hex) of value: the unique key, since a 4,096-character value is too long for a btree entry. */
  valueHash: string;
  createdAt: Date;
  createdBy: string | null;
  /** Why it was added (up to 500 characters; '' when none was given). */
  reason: string;
}

export const BlacklistEntrySchema = new EntitySchema<BlacklistEntry>({
  name: 'BlacklistEntry',
  tableName: 'blacklist_entries',
  uniques: [{ properties: ['appId', 'type', 'valueHash'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    type: { type: 'string', length: 4 },
    value: { type: 'text' },
    valueHash: { type: 'string', length: 64 },
    createdAt: { type: 'datetime' },
    createdBy: { type: 'uuid', nullable: true },
    reason: { type: 'string', length: 500, default: '' },
  },
});
