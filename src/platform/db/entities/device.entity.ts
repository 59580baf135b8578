import { EntitySchema } from '@mikro-orm/core';

/**
 * A machine that activated a key license-only (`KeyDevice`) or logged in as an end user (`UserDevice`)
 * (docs/protocol.md 12.1). Every HWID seen is recorded; `bound` marks the ones that hold one of the key's
 * `max_devices` places under hwid_lock (the generalisation of docs/spec.md's single pinned HWID).
 */
export interface KeyDevice {
  licenseId: string;
  hwid: string;
  firstSeen: Date;
  lastSeen: Date;
  bound: boolean;
}

export interface UserDevice {
  userId: string;
  hwid: string;
  firstSeen: Date;
  lastSeen: Date;
  bound: boolean;
}

export const KeyDeviceSchema = new EntitySchema<KeyDevice>({
  name: 'KeyDevice',
  tableName: 'key_devices',
  properties: {
    licenseId: {
      kind: 'm:1',
      entity: 'LicenseKey',
      mapToPk: true,
      primary: true,
      fieldName: 'license_id',
      deleteRule: 'cascade',
    },
    hwid: { type: 'string', length: 256, primary: true },
    firstSeen: { type: 'datetime' },
    lastSeen: { type: 'datetime' },
    bound: { type: 'boolean', default: false },
  },
});

export const UserDeviceSchema = new EntitySchema<UserDevice>({
  name: 'UserDevice',
  tableName: 'user_devices',
  properties: {
    userId: {
      kind: 'm:1',
      entity: 'EndUser',
      mapToPk: true,
      primary: true,
      fieldName: 'user_id',
      deleteRule: 'cascade',
    },
    hwid: { type: 'string', length: 256, primary: true },
    firstSeen: { type: 'datetime' },
    lastSeen: { type: 'datetime' },
    bound: { type: 'boolean', default: false },
  },
});
