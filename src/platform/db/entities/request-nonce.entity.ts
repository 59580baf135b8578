import { EntitySchema } from '@mikro-orm/core';

/**
 * The request-nonce ledger (docs/protocol.md 3, 11.21): a nonce accepted once for an application is refused
 * until `expiresAt`, whatever happened to the process that accepted it. No foreign key: rows live
 * 600 s and an application's deletion leaves nothing that could match again.
 */
export interface RequestNonce {
  appId: string;
  nonce: string;
  expiresAt: Date;
}

export const RequestNonceSchema = new EntitySchema<RequestNonce>({
  name: 'RequestNonce',
  tableName: 'request_nonces',
  properties: {
    appId: { type: 'uuid', primary: true },
    nonce: { type: 'string', length: 64, primary: true },
    expiresAt: { type: 'datetime', index: true },
  },
});
