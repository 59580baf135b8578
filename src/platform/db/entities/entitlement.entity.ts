import { EntitySchema } from '@mikro-orm/core';

/** One entry of an application's entitlement catalogue (docs/protocol.md 12.3); keys carry the codes. */
export interface Entitlement {
  appId: string;
  code: string;
  name: string;
  /** Order in the catalogue as it was last written. */
  position: number;
}

export const EntitlementSchema = new EntitySchema<Entitlement>({
  name: 'Entitlement',
  tableName: 'app_entitlements',
  properties: {
    appId: {
      kind: 'm:1',
      entity: 'Application',
      mapToPk: true,
      primary: true,
      fieldName: 'app_id',
      deleteRule: 'cascade',
    },
    code: { type: 'string', length: 64, primary: true },
    name: { type: 'string', length: 200, default: '' },
    position: { type: 'integer' },
  },
});
