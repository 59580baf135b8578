import { EntitySchema } from '@mikro-orm/core';

/** A signed-in dashboard session; the bearer token is stored only as its SHA-256. */
export interface DashboardSession {
  id: string;
  accountId: string;
  tokenHash: string;
  createdAt: Date;
  expiresAt: Date;
  lastSeenAt: Date;
  ip: string;
  /** The browser's User-Agent at sign-in (the Security page's session list). */
  userAgent: string;
}

export const DashboardSessionSchema = new EntitySchema<DashboardSession>({
  name: 'DashboardSession',
  tableName: 'dashboard_sessions',
  properties: {
    id: { type: 'uuid', primary: true },
    accountId: {
      kind: 'm:1',
      entity: 'Account',
      mapToPk: true,
      fieldName: 'account_id',
      deleteRule: 'cascade',
      index: true,
    },
    tokenHash: { type: 'string', length: 64, unique: true },
    createdAt: { type: 'datetime' },
    expiresAt: { type: 'datetime' },
    lastSeenAt: { type: 'datetime' },
    ip: { type: 'string', length: 64, default: '' },
    userAgent: { type: 'string', length: 256, default: '' },
  },
});
