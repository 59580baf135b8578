// The small pure rules of services/: the team password policy, IP normalisation, which webhook
// targets are public, and the dashboard's roles and permissions. The integration suites reach them
// through a server; these pin them directly and fast (the mutation run executes them per mutant).
import { describe, expect, it } from 'vitest';
import {
  PASSWORD_MAX,
  PASSWORD_MIN,
  assertPasswordPolicy,
  passwordProblem,
} from '../../src/modules/access/password-policy.js';
import { normalizeIp } from '../../src/platform/http/ip-address.js';
import { assertWebhookUrl, isPublicAddress } from '../../src/modules/notify/webhook-url.js';
import {
  effectiveRole,
  hasPermission,
  requirePermission,
  requireRole,
  type Principal,
} from '../../src/modules/access/principal.js';
import { noPermissions, type Account } from '../../src/platform/db/entities/account.entity.js';
import { AppError, ValidationError } from '../../src/errors.js';

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

describe('IP addresses', () => {
  it('an IPv4-mapped IPv6 address is the IPv4 address; everything lower-cased', () => {
    expect(normalizeIp('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(normalizeIp('::FFFF:203.0.113.9')).toBe('203.0.113.9');
    expect(normalizeIp('::ffff:not-an-ip')).toBe('::ffff:not-an-ip');
    expect(normalizeIp('::ffff:1:2')).toBe('::ffff:1:2');
    expect(normalizeIp('2001:DB8::1')).toBe('2001:db8::1');
    expect(normalizeIp('198.51.100.7')).toBe('198.51.100.7');
    expect(normalizeIp('1:2:3::1.2.3.4')).toBe('1:2:3::1.2.3.4'); // an embedded IPv4 that is not mapped
  });
});

describe('webhook targets', () => {
  it('public addresses are public; private, loopback, link-local, documentation and multicast ranges are not', () => {
    const cases: [string, boolean][] = [
      ['8.8.8.8', true],
      ['11.0.0.1', true],
      ['0.1.2.3', false],
      ['9.255.255.255', true],
      ['10.0.0.1', false],
      ['10.255.255.255', false],
      ['100.63.255.255', true],
      ['100.64.0.1', false],
      ['100.127.255.255', false],
      ['100.128.0.1', true],
      ['127.0.0.1', false],
      ['169.254.1.1', false],
      ['172.15.255.255', true],
      ['172.16.0.1', false],
      ['172.31.255.255', false],
      ['172.32.0.1', true],
      ['192.0.0.1', false],
      ['192.0.1.1', true],
      ['192.0.2.1', false],
      ['192.168.1.1', false],
      ['198.18.0.1', false],
      ['198.19.255.255', false],
      ['198.20.0.1', true],
      ['198.51.100.1', false],
      ['203.0.113.1', false],
      ['224.0.0.1', false],
      ['239.255.255.255', false],
      ['240.0.0.1', false],
      ['255.255.255.255', false],
      ['::', false],
      ['::1', false],
      ['::2', true],
      ['fc00::1', false],
      ['fdff::1', false],
      ['fe80::1', false],
      ['febf::1', false],
      ['fec0::1', true],
      ['ff02::1', false],
      ['2001:db8::1', false],
      ['2001:db9::1', true],
      ['64:ff9b::1.2.3.4', false],
      ['64:ff9b:1::1', true],
      ['2606:4700::1111', true],
      ['::ffff:10.0.0.1', false],
      ['::FFFF:10.0.0.1', false],
      ['::ffff:8.8.8.8', true],
      ['not-an-ip', false],
      ['', false],
    ];
    for (const [ip, expected] of cases) expect(isPublicAddress(ip), ip).toBe(expected);
  });

  const rejected = async (raw: string, allowPrivate = false, field?: string) => {
    const err = await assertWebhookUrl(raw, allowPrivate, field).catch((e: unknown) => e);
    expect(err, raw).toBeInstanceOf(ValidationError);
    return (err as ValidationError).issues;
  };

  it('must be https to a public address, without credentials', async () => {
    expect((await assertWebhookUrl('https://8.8.8.8/hook?x=1', false)).href).toBe('https://8.8.8.8/hook?x=1');
    expect((await assertWebhookUrl('https://[2606:4700::1111]:8443/h', false)).hostname).toBe('[2606:4700::1111]');
    expect(await rejected('http://8.8.8.8/hook')).toEqual([
      { loc: ['body', 'webhook'], msg: 'Webhook must be a public https URL', type: 'url_not_public' },
    ]);
    expect((await rejected('https://10.0.0.1/', false, 'alert_webhook'))[0]!.loc).toEqual(['body', 'alert_webhook']);
    await rejected('https://[::1]/');
    await rejected('https://user:pw@8.8.8.8/');
    await rejected('https://user@8.8.8.8/');
    await rejected('https://:pw@8.8.8.8/');
    await rejected('not a url');
    await rejected('https://localhost/'); // resolves to loopback
  });

  it('with private targets allowed (tests), http and loopback pass, other schemes and credentials do not', async () => {
    expect((await assertWebhookUrl('http://127.0.0.1:9/h', true)).port).toBe('9');
    expect((await assertWebhookUrl('https://localhost/h', true)).hostname).toBe('localhost');
    await rejected('ftp://127.0.0.1/', true);
    await rejected('http://u:p@127.0.0.1/', true);
    await rejected('nonsense', true);
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
