import { EntitySchema } from '@mikro-orm/core';

export type LicenseStatus = 'unused' | 'pending' | 'used' | 'banned';
export type DurationUnit = 'hours' | 'days' | 'weeks' | 'months' | 'lifetime';

/**
 * A license key. The plaintext is never stored: `keyHash` is HMAC-SHA256 under LICENSE_HASH_KEY
 * and `keyPreview` keeps the first and last four characters (docs/protocol.md 9, 11.15).
 */
export interface LicenseKey {
  id: string;
  appId: string;
  keyHash: string;
  keyPreview: string;
  status: LicenseStatus;
  usedBy: string;
  userId: string | null;
  hwid: string;
  ip: string;
  level: number;
  durationValue: number;
  durationUnit: DurationUnit;
  /** 0 means lifetime. */
  durationDays: number;
  createdAt: Date;
  lastLogin: Date | null;
  expiresAt: Date | null;
  /** Set while a register holds the claim; recovered on start if a process died holding it. */
  pendingSince: Date | null;
  note: string;
  resellerId: string | null;
  createdBy: string | null;
  activationGeo: Record<string, unknown> | null;
  /** Where the key was used last (license-only use), and every country it was used from. */
  lastGeo: Record<string, unknown> | null;
  knownCountries: string[];
  screenshotPath: string;
  /** docs/protocol.md 12.2: this key's bound on live heartbeat sessions; null: the application's. */
  maxSessions: number | null;
  /** Devices this key (or its user) may hold under hwid_lock; null: the application's (docs/protocol.md 12.1). */
  maxDevices: number | null;
  /** Entitlement codes of the application's catalogue (docs/protocol.md 12.3). */
  entitlements: string[];
}

export const LicenseKeySchema = new EntitySchema<LicenseKey>({
  name: 'LicenseKey',
  tableName: 'license_keys',
  uniques: [{ properties: ['appId', 'keyHash'] }],
  indexes: [
    { properties: ['appId', 'createdAt'] },
    { properties: ['status', 'pendingSince'] },
    { properties: ['expiresAt'] },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    keyHash: { type: 'string', length: 64 },
    keyPreview: { type: 'string', length: 16 },
    status: { type: 'string', length: 10, default: 'unused' },
    usedBy: { type: 'string', length: 64, default: '' },
    userId: { type: 'uuid', nullable: true },
    hwid: { type: 'string', length: 256, default: '' },
    ip: { type: 'string', length: 64, default: '' },
    level: { type: 'integer', default: 1 },
    durationValue: { type: 'integer' },
    durationUnit: { type: 'string', length: 8 },
    durationDays: { type: 'integer' },
    createdAt: { type: 'datetime' },
    lastLogin: { type: 'datetime', nullable: true },
    expiresAt: { type: 'datetime', nullable: true },
    pendingSince: { type: 'datetime', nullable: true },
    note: { type: 'text', default: '' },
    resellerId: { type: 'uuid', nullable: true, index: true },
    createdBy: { type: 'uuid', nullable: true },
    activationGeo: { type: 'json', nullable: true },
    lastGeo: { type: 'json', nullable: true },
    knownCountries: { type: 'json', default: '[]' },
    screenshotPath: { type: 'text', default: '' },
    maxSessions: { type: 'integer', nullable: true },
    maxDevices: { type: 'integer', nullable: true },
    entitlements: { type: 'json', default: '[]' },
  },
});
