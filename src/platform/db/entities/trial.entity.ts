import { EntitySchema } from '@mikro-orm/core';

/**
 * A trial taken by one HWID of one application (docs/protocol.md 12.4). The primary key is what makes a
 * trial once per device forever: the row outlives its key (no foreign key to license_keys).
 */
export interface Trial {
  appId: string;
  hwid: string;
  licenseId: string;
  createdAt: Date;
}

export const TrialSchema = new EntitySchema<Trial>({
  name: 'Trial',
  tableName: 'trials',
  properties: {
    appId: {
      kind: 'm:1',
      entity: 'Application',
      mapToPk: true,
      primary: true,
      fieldName: 'app_id',
      deleteRule: 'cascade',
    },
    hwid: { type: 'string', length: 256, primary: true },
    licenseId: { type: 'uuid' },
    createdAt: { type: 'datetime' },
  },
});
