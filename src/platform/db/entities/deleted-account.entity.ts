import { EntitySchema } from '@mikro-orm/core';

/**
 * What is kept of a deleted team member (docs/protocol.md 11.32): the accounts above it when it was deleted,
 * so the audit entries it made stay visible to everyone who saw them (an owner, the admins above it)
 * and can be shown with the actor marked deleted. Never read for authorization.
 */
interface DeletedAccount {
  id: string;
  username: string;
  role: string;
  /** Ids of every account above it at its deletion, its parent first. */
  ancestorIds: string[];
  deletedAt: Date;
}

export const DeletedAccountSchema = new EntitySchema<DeletedAccount>({
  name: 'DeletedAccount',
  tableName: 'deleted_accounts',
  properties: {
    id: { type: 'uuid', primary: true },
    username: { type: 'string', length: 64 },
    role: { type: 'string', length: 16 },
    ancestorIds: { type: 'json' },
    deletedAt: { type: 'datetime' },
  },
});
