import { EntitySchema } from '@mikro-orm/core';

/** docs/spec.md "End user": an account of a licensed program, unique by username inside its application. */
export interface EndUser {
  id: string;
  appId: string;
  username: string;
  passwordHash: string;
  createdAt: Date;
  lastLogin: Date | null;
  ip: string;
  hwid: string;
  knownHwids: string[];
  knownCountries: string[];
  level: number;
  expiresAt: Date | null;
  banned: boolean;
  licenseId: string | null;
  resellerId: string | null;
  lastGeo: Record<string, unknown> | null;
  geo: Record<string, unknown> | null;
  activationGeo: Record<string, unknown> | null;
  lastScreenshotPath: string;
  activationScreenshotPath: string;
  screenshotPath: string;
}

export const EndUserSchema = new EntitySchema<EndUser>({
  name: 'EndUser',
  tableName: 'end_users',
  uniques: [{ properties: ['appId', 'username'] }],
  indexes: [{ properties: ['appId', 'createdAt'] }, { properties: ['expiresAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    username: { type: 'string', length: 64 },
    passwordHash: { type: 'text' },
    createdAt: { type: 'datetime' },
    lastLogin: { type: 'datetime', nullable: true },
    ip: { type: 'string', length: 64, default: '' },
    hwid: { type: 'string', length: 256, default: '' },
    knownHwids: { type: 'json', default: '[]' },
    knownCountries: { type: 'json', default: '[]' },
    level: { type: 'integer', default: 1 },
    expiresAt: { type: 'datetime', nullable: true },
    banned: { type: 'boolean', default: false },
    licenseId: { type: 'uuid', nullable: true, index: true },
    resellerId: { type: 'uuid', nullable: true, index: true },
    lastGeo: { type: 'json', nullable: true },
    geo: { type: 'json', nullable: true },
    activationGeo: { type: 'json', nullable: true },
    lastScreenshotPath: { type: 'text', default: '' },
    activationScreenshotPath: { type: 'text', default: '' },
    screenshotPath: { type: 'text', default: '' },
  },
});
