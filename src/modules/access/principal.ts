// Who is calling the dashboard API, and what they may do. Owner, admin and developer pass every
// permission check (docs/spec.md "Permission set"); developers are super-users across every owner.
// A call made with an API token is its account's principal narrowed by the token (docs/protocol.md 13.1):
// the account's rights as they are now, and no more than the token's scopes and app_ids.
import type { Account, PermissionKey, StoredRole } from '../../platform/db/entities/index.js';
import { AppError } from '../../errors.js';
import type { TokenScope } from './token-scopes.js';

export type Role = StoredRole | 'developer';

/** What an API token narrows its account to. */
export interface TokenGrant {
  readonly id: string;
  readonly scopes: readonly TokenScope[];
  /** null: every application the account reaches. */
  readonly appIds: readonly string[] | null;
}

export interface Principal {
  readonly account: Account;
  readonly role: Role;
  /** The sign-in session; null when an API token authenticated the call. */
  readonly sessionId: string | null;
  readonly token?: TokenGrant;
  /** The owner requires two-factor sign-in and this member has not set it up (docs/protocol.md 13.2). */
  readonly twoFactorMissing?: boolean;
  /** The address the call came from (audit entries of what it changes). */
  readonly ip?: string;
  /** When the credential (sign-in session or API token) stops being valid, ms; absent: never. */
  readonly expiresAt?: number;
}

/** Who did something, as audit entries record it (docs/protocol.md 13.3). */
export interface Actor {
  readonly id: string;
  readonly username: string;
  readonly role: Role;
  readonly tokenId?: string;
  /** Where it acted from: an entry's address when the writer names none. */
  readonly ip?: string;
}

export function actorOf(p: Principal): Actor {
  return {
    id: p.account.id,
    username: p.account.username,
    role: p.role,
    ...(p.token ? { tokenId: p.token.id } : {}),
    ...(p.ip ? { ip: p.ip } : {}),
  };
}

export function effectiveRole(account: Account, developerEmails: readonly string[]): Role {
  if (account.email && developerEmails.includes(account.email.toLowerCase())) return 'developer';
  return account.role;
}

export function hasPermission(p: Principal, key: PermissionKey): boolean {
  if (p.role !== 'reseller') return true;
  return p.account.permissions[key] === true;
}

export function requirePermission(p: Principal, key: PermissionKey): void {
  if (!hasPermission(p, key)) throw new AppError('permission_denied');
}

/**
 * Whether `viewer` oversees what account `accountId` started or receives (its bulk jobs, its webhook
 * deliveries): the account itself, a developer, or an owner whose tree holds it.
 */
export async function overseesAccount(
  viewer: Principal,
  accountId: string,
  subtreeIds: (ownerId: string) => Promise<readonly string[]>,
): Promise<boolean> {
  if (accountId === viewer.account.id || viewer.role === 'developer') return true;
  return viewer.role === 'owner' && (await subtreeIds(viewer.account.id)).includes(accountId);
}

export function requireRole(p: Principal, ...roles: Role[]): void {
  if (!roles.includes(p.role)) throw new AppError('permission_denied');
}

/** What access writes to the audit log: account-level entries (the audit module's repository fits it). */
export interface AuditWriter {
  write(entry: {
    appId: null;
    action: string;
    detail?: string;
    ip?: string;
    level?: 'info' | 'warning';
    actor?: Actor;
    userAgent?: string;
  }): void;
}
