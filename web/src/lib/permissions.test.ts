// docs/spec.md "Dashboard roles" rule 2 (tabs) and the stats tiles, for every role and the permissions that matter.
import { describe, expect, it } from 'vitest';
import {
  can,
  defaultTab,
  isManager,
  PERMISSION_KEYS,
  resolveTab,
  showsStats,
  visibleTabs,
  type Caller,
  type Permissions,
} from './permissions.js';

const reseller = (...keys: (keyof Permissions)[]): Caller => ({
  role: 'reseller',
  permissions: Object.fromEntries(keys.map((k) => [k, true])),
});

describe('tabs (docs/spec.md "Dashboard roles" rule 2)', () => {
  it.each(['owner', 'admin', 'developer'] as const)('%s sees every tab, Licenses first', (role) => {
    const c: Caller = { role, permissions: null }; // their stored matrix does not matter
    expect(visibleTabs(c)).toEqual([
      'licenses',
      'users',
      'security',
      'logs',
      'integration',
      'products',
      'releases',
      'settings',
    ]);
    expect(defaultTab(c)).toBe('licenses');
    expect(showsStats(c)).toBe(true);
    expect(isManager(c)).toBe(true);
  });

  it('a reseller without permissions sees Integration only, and lands there', () => {
    const c = reseller();
    expect(visibleTabs(c)).toEqual(['integration']);
    expect(defaultTab(c)).toBe('integration');
    expect(showsStats(c)).toBe(false);
    expect(isManager(c)).toBe(false);
  });

  it('view_keys opens Licenses and Users and makes Licenses the default', () => {
    const c = reseller('view_keys');
    expect(visibleTabs(c)).toEqual(['licenses', 'users', 'integration']);
    expect(defaultTab(c)).toBe('licenses');
  });

  it('view_blocked_ips opens Security; view_auth_logs opens Logs; neither changes the default', () => {
    expect(visibleTabs(reseller('view_blocked_ips'))).toEqual(['security', 'integration']);
    expect(visibleTabs(reseller('view_auth_logs'))).toEqual(['logs', 'integration']);
    expect(defaultTab(reseller('view_blocked_ips', 'view_auth_logs'))).toBe('integration');
  });

  it('a reseller never sees Settings, even with every permission', () => {
    const all = reseller(...PERMISSION_KEYS);
    expect(visibleTabs(all)).toEqual(['licenses', 'users', 'security', 'logs', 'integration']);
    expect(showsStats(all)).toBe(true);
  });

  it('stats tiles need view_stats', () => {
    expect(showsStats(reseller('view_keys'))).toBe(false);
    expect(showsStats(reseller('view_stats'))).toBe(true);
  });

  it('a requested tab the caller may not open resolves to the default', () => {
    expect(resolveTab(reseller(), 'licenses')).toBe('integration');
    expect(resolveTab(reseller('view_keys'), 'settings')).toBe('licenses');
    expect(resolveTab(reseller('view_keys'), 'users')).toBe('users');
    expect(resolveTab({ role: 'owner' }, undefined)).toBe('licenses');
    expect(resolveTab({ role: 'owner' }, 'nonsense')).toBe('licenses');
  });

  it('a permission set to false, or missing, is not granted', () => {
    expect(can({ role: 'reseller', permissions: { view_keys: false } }, 'view_keys')).toBe(false);
    expect(can({ role: 'reseller', permissions: null }, 'view_keys')).toBe(false);
  });
});
