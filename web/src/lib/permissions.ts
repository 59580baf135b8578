// Who sees what (docs/spec.md "Permission set" and "Dashboard roles" rule 2), as pure functions of the signed-in
// account. The server enforces every rule; these only decide what the page offers.

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
export type Permissions = Partial<Record<PermissionKey, boolean>>;
export type Role = 'owner' | 'admin' | 'reseller' | 'developer';

export const PERMISSION_LABELS: Readonly<Record<PermissionKey, string>> = {
  view_keys: 'View keys (Licenses, Users)',
  view_hwid: 'View HWIDs',
  view_ip: 'View IPs and locations',
  view_auth_logs: 'View auth logs',
  view_blocked_ips: 'View blocked IPs (Security)',
  generate_keys: 'Generate keys',
  ban_unban_keys: 'Ban / unban keys',
  freeze_unfreeze: 'Freeze / unfreeze users',
  reset_hwid: 'Reset HWID',
  delete_keys: 'Delete keys and users',
  view_stats: 'View stats',
};

export interface Caller {
  role: Role;
  permissions?: Permissions | null;
}

/** Owners, admins and developers pass every permission check; resellers need the key. */
export function can(c: Caller, key: PermissionKey): boolean {
  return c.role !== 'reseller' || c.permissions?.[key] === true;
}

/** Owner, admin or developer: app settings, extend, blacklist changes, SDK downloads, team. */
export function isManager(c: Caller): boolean {
  return c.role === 'owner' || c.role === 'admin' || c.role === 'developer';
}

export const TABS = [
  'licenses',
  'users',
  'security',
  'logs',
  'integration',
  'products',
  'releases',
  'settings',
] as const;
export type Tab = (typeof TABS)[number];

export const TAB_LABELS: Readonly<Record<Tab, string>> = {
  licenses: 'Licenses',
  users: 'Users',
  security: 'Security',
  logs: 'Logs',
  integration: 'Integration',
  products: 'Products',
  releases: 'Releases',
  settings: 'Settings',
};

/**
 * docs/spec.md "Dashboard roles" rule 2: Licenses and Users need view_keys; Security needs view_blocked_ips; Logs
 * needs view_auth_logs; Integration always; Settings only for owners, admins and developers.
 */
export function visibleTabs(c: Caller): Tab[] {
  return TABS.filter((t) => {
    switch (t) {
      case 'licenses':
      case 'users':
        return can(c, 'view_keys');
      case 'security':
        return can(c, 'view_blocked_ips');
      case 'logs':
        return can(c, 'view_auth_logs');
      case 'integration':
        return true;
      case 'products':
      case 'releases':
      case 'settings':
        return isManager(c);
    }
  });
}

/** The default tab is Licenses when the caller can see keys, else Integration. */
export function defaultTab(c: Caller): Tab {
  return can(c, 'view_keys') ? 'licenses' : 'integration';
}

/** A requested tab if the caller may see it, else the default one. */
export function resolveTab(c: Caller, requested: string | undefined): Tab {
  const tabs = visibleTabs(c);
  return tabs.includes(requested as Tab) ? (requested as Tab) : defaultTab(c);
}

/** Stats tiles need view_stats. */
export function showsStats(c: Caller): boolean {
  return can(c, 'view_stats');
}
