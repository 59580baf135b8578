import { EntitySchema } from '@mikro-orm/core';

/**
 * An API token for automation (docs/protocol.md 13.1): it acts as its account, narrowed to `scopes` and
 * `appIds`. The token itself is never stored, only its keyed hash (HMAC-SHA256 under a server key).
 */
export interface ApiToken {
  id: string;
  accountId: string;
  name: string;
  tokenHash: string;
  scopes: string[];
  /** null: every application the account reaches at the time of a call. */
  appIds: string[] | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  lastUsedIp: string;
}

export const ApiTokenSchema = new EntitySchema<ApiToken>({
  name: 'ApiToken',
  tableName: 'api_tokens',
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
    name: { type: 'string', length: 100 },
    tokenHash: { type: 'string', length: 64, unique: true },
    scopes: { type: 'json' },
    appIds: { type: 'json', nullable: true },
    expiresAt: { type: 'datetime', nullable: true },
    createdAt: { type: 'datetime' },
    lastUsedAt: { type: 'datetime', nullable: true },
    lastUsedIp: { type: 'string', length: 64, default: '' },
  },
});
