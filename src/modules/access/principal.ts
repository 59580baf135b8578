// Who is calling the dashboard API, and what they may do. Owner, admin and developer pass every
// permission check (SPEC "Permission set"); developers are super-users across every owner.
import type { Account, PermissionKey, StoredRole } from '../../platform/db/entities/index.js';
import { AppError } from '../../errors.js';

export type Role = StoredRole | 'developer';

export interface Principal {
  readonly account: Account;
  readonly role: Role;
  readonly sessionId: string;
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

export function requireRole(p: Principal, ...roles: Role[]): void {
  if (!roles.includes(p.role)) throw new AppError('permission_denied');
}
