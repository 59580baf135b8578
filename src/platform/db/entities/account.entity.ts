import { EntitySchema } from '@mikro-orm/core';

export type StoredRole = 'owner' | 'admin' | 'reseller';

export const PERMISSION_KEYS = [
  'view_keys',
  'view_hwid',
  'view_ip',
  'view_auth_logs',
  'view_blocked_ips',
  'generate_keys',
  'ban_unban_keys',
  'freeze_unfreeze',
  'reset_hwid',
  'delete_keys',
  'view_stats',
] as const;
export type PermissionKey = (typeof PERMISSION_KEYS)[number];
export type Permissions = Record<PermissionKey, boolean>;

export function noPermissions(): Permissions {
  return Object.fromEntries(PERMISSION_KEYS.map((k) => [k, false])) as Permissions;
}

/** A dashboard team account (docs/spec.md "Team account"). */
export interface Account {
  id: string;
  username: string;
  displayName: string;
  email: string | null;
  role: StoredRole;
  parentId: string | null;
  /** Root owner of the tree this account belongs to (itself for owners). */
  ownerId: string;
  enabled: boolean;
  allowedApps: string[];
  /** Credits; null means unlimited (docs/protocol.md 11.7). */
  keyQuota: number | null;
  notes: string;
  permissions: Permissions;
  subscriptionExpiresAt: Date | null;
  passwordHash: string;
  webhook: string;
  webhookSecret: string;
  /** The TOTP secret, sealed (secretbox, base64); null: two-factor sign-in is off. */
  twoFactorSecret: string | null;
  /** A secret set up but not yet confirmed with a code (replaced by the next setup). */
  twoFactorPending: string | null;
  /** The last TOTP time step accepted: a code of that step or an earlier one is refused (no replay). */
  twoFactorLastStep: number | null;
  /** An owner's policy: every member of its tree must sign in with two factors. */
  requireTwoFactor: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const AccountSchema = new EntitySchema<Account>({
  name: 'Account',
  tableName: 'accounts',
  properties: {
    id: { type: 'uuid', primary: true },
    username: { type: 'string', length: 32, unique: true },
    displayName: { type: 'string', length: 100, default: '' },
    email: { type: 'string', length: 254, nullable: true, unique: true },
    role: { type: 'string', length: 16 },
    parentId: { type: 'uuid', nullable: true, index: true },
    ownerId: { type: 'uuid', index: true },
    enabled: { type: 'boolean', default: true },
    allowedApps: { type: 'json', default: '[]' },
    keyQuota: { type: 'integer', nullable: true },
    notes: { type: 'text', default: '' },
    permissions: { type: 'json' },
    subscriptionExpiresAt: { type: 'datetime', nullable: true },
    passwordHash: { type: 'text' },
    webhook: { type: 'text', default: '' },
    webhookSecret: { type: 'string', length: 64 },
    twoFactorSecret: { type: 'text', nullable: true },
    twoFactorPending: { type: 'text', nullable: true },
    twoFactorLastStep: { type: 'integer', nullable: true },
    requireTwoFactor: { type: 'boolean', default: false },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
  },
});
