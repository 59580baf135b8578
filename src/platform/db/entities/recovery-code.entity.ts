import { EntitySchema } from '@mikro-orm/core';

/** A two-factor recovery code (docs/protocol.md 13.2), stored as its keyed hash; usable once. */
export interface RecoveryCode {
  accountId: string;
  codeHash: string;
  usedAt: Date | null;
}

export const RecoveryCodeSchema = new EntitySchema<RecoveryCode>({
  name: 'RecoveryCode',
  tableName: 'two_factor_recovery_codes',
  properties: {
    accountId: {
      kind: 'm:1',
      entity: 'Account',
      mapToPk: true,
      fieldName: 'account_id',
      deleteRule: 'cascade',
      primary: true,
    },
    codeHash: { type: 'string', length: 64, primary: true },
    usedAt: { type: 'datetime', nullable: true },
  },
});
