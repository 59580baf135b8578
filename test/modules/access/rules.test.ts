// The small pure rules of access: the password policy, and the dashboard's roles and permissions.
// The integration suites reach them through a server; these pin them directly and fast (the
// mutation run executes them per mutant).
import { describe, expect, it } from 'vitest';
import {
  PASSWORD_MAX,
  PASSWORD_MIN,
  assertPasswordPolicy,
  passwordProblem,
} from '../../../src/modules/access/password-policy.js';
import {
  effectiveRole,
  hasPermission,
  requirePermission,
  requireRole,
  type Principal,
} from '../../../src/modules/access/principal.js';
import { noPermissions, type Account } from '../../../src/platform/db/entities/account.entity.js';
import { AppError, ValidationError } from '../../../src/errors.js';

describe('password policy', () => {
  it('8 to 128 characters', () => {
    expect([PASSWORD_MIN, PASSWORD_MAX]).toEqual([8, 128]);
    expect(passwordProblem('abcdef1')).toBe('Password must be at least 8 characters');
    expect(passwordProblem('abcdefg1')).toBeUndefined();
    expect(passwordProblem('a1'.repeat(64))).toBeUndefined();
    expect(passwordProblem('a1'.repeat(64) + 'x')).toBe('Password must be at most 128 characters');
  });

  it('a letter (any script) and something that is not a letter', () => {
    const msg = 'Password must contain a letter and a digit or symbol';
    expect(passwordProblem('abcdefgh')).toBe(msg);
    expect(passwordProblem('12345678')).toBe(msg);
    expect(passwordProblem('Ünïcödé!')).toBeUndefined();
    expect(passwordProblem('пароль-1')).toBeUndefined();
    expect(passwordProblem('12345678a')).toBeUndefined();
  });

  it('not the username, in any case', () => {
    expect(passwordProblem('Alice-2026', 'alice-2026')).toBe('Password must not be the username');
    expect(passwordProblem('alice-2026', 'ALICE-2026')).toBe('Password must not be the username');
    expect(passwordProblem('alice-2026', 'alice')).toBeUndefined();
    expect(passwordProblem('alice-2026', '')).toBeUndefined();
  });

  it('a violation is a 422 on the field', () => {
    expect(() => assertPasswordPolicy('abcdefg1')).not.toThrow();
    const err = (() => {
      try {
        assertPasswordPolicy('short', undefined, 'new_password');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toEqual([
      { loc: ['body', 'new_password'], msg: 'Password must be at least 8 characters', type: 'password_policy' },
    ]);
    expect(() => assertPasswordPolicy('abcdefgh')).toThrow(ValidationError);
    try {
      assertPasswordPolicy('abcdefgh');
    } catch (e) {
      expect((e as ValidationError).issues[0]!.loc).toEqual(['body', 'password']);
    }
  });
});

describe('roles and permissions', () => {
  const account = (role: Account['role'], email: string | null, granted: string[] = []) =>
    ({
      role,
      email,
      permissions: { ...noPermissions(), ...Object.fromEntries(granted.map((k) => [k, true])) },
    }) as unknown as Account;
  const principal = (a: Account, role: Principal['role']): Principal => ({ account: a, role, sessionId: 's' });

  it('a developer is an account whose email is on the developer list, in any case', () => {
    expect(effectiveRole(account('reseller', 'dev@example.com'), ['dev@example.com'])).toBe('developer');
    expect(effectiveRole(account('owner', 'Dev@Example.com'), ['dev@example.com'])).toBe('developer');
    expect(effectiveRole(account('admin', 'other@example.com'), ['dev@example.com'])).toBe('admin');
    expect(effectiveRole(account('reseller', null), ['dev@example.com'])).toBe('reseller');
    expect(effectiveRole(account('owner', ''), [''])).toBe('owner');
  });

  it('owners, admins and developers have every permission; a reseller only those granted', () => {
    for (const role of ['owner', 'admin', 'developer'] as const)
      expect(hasPermission(principal(account('reseller', null), role), 'generate_keys')).toBe(true);
    const reseller = principal(account('reseller', null, ['view_keys']), 'reseller');
    expect(hasPermission(reseller, 'view_keys')).toBe(true);
    expect(hasPermission(reseller, 'generate_keys')).toBe(false);
    expect(() => requirePermission(reseller, 'view_keys')).not.toThrow();
    expect(() => requirePermission(reseller, 'generate_keys')).toThrow(AppError);
    try {
      requirePermission(reseller, 'generate_keys');
    } catch (e) {
      expect((e as AppError).code).toBe('permission_denied');
    }
  });

  it('requireRole passes only the roles named', () => {
    const admin = principal(account('admin', null), 'admin');
    expect(() => requireRole(admin, 'owner', 'admin')).not.toThrow();
    expect(() => requireRole(admin, 'owner')).toThrow(AppError);
    try {
      requireRole(admin, 'owner', 'developer');
    } catch (e) {
      expect((e as AppError).code).toBe('permission_denied');
    }
  });
});
