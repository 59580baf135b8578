// docs/spec.md's license tables as ordered guards: the first failing check decides the answer.
import { describe, expect, it } from 'vitest';
import {
  isClaimable,
  judgeActivate,
  judgeRegister,
  registeredExpiry,
  type KeyFacts,
} from '../../../src/modules/activation/license-policy.js';

const NOW = Date.parse('2026-11-22T00:00:00Z');
const DAY = 86_400_000;
const key = (over: Partial<KeyFacts> = {}): KeyFacts => ({
  status: 'unused',
  usedBy: '',
  userId: null,
  hwid: '',
  level: 2,
  durationValue: 30,
  durationUnit: 'days',
  expiresAt: null,
  resellerId: null,
  maxDevices: null,
  entitlements: [],
  ...over,
});
const device = { hwid: 'hwid-0001', hwidLock: true, maxDevices: 1 };

describe('judgeRegister', () => {
  it('refuses in docs/spec.md order: unknown, banned, already used', () => {
    expect(judgeRegister(undefined)).toEqual({ ok: false, code: 'license_invalid' });
    expect(judgeRegister(key({ status: 'banned', usedBy: 'x', userId: 'u' }))).toEqual({
      ok: false,
      code: 'license_banned',
    });
    expect(judgeRegister(key({ status: 'used', usedBy: 'alice', userId: 'u1' }))).toEqual({
      ok: false,
      code: 'license_used',
    });
    expect(judgeRegister(key({ status: 'used', usedBy: 'license-only' }))).toEqual({ ok: false, code: 'license_used' });
    expect(judgeRegister(key({ status: 'pending' }))).toEqual({ ok: false, code: 'license_used' });
  });

  it('claims an unused key, and a used key whose user was deleted (docs/protocol.md 11.10)', () => {
    expect(judgeRegister(key())).toMatchObject({ ok: true });
    const orphan = key({ status: 'used', usedBy: 'gone', userId: null, expiresAt: new Date(NOW + 5 * DAY) });
    expect(isClaimable(orphan)).toBe(true);
    expect(judgeRegister(orphan)).toMatchObject({ ok: true });
    // The new user inherits the remaining time; a fresh key runs its duration from now.
    expect(registeredExpiry(orphan, NOW)).toEqual(new Date(NOW + 5 * DAY));
    expect(registeredExpiry(key(), NOW)).toEqual(new Date(NOW + 30 * DAY));
    expect(registeredExpiry(key({ durationUnit: 'lifetime', durationValue: 0 }), NOW)).toBeNull();
  });
});

describe('judgeActivate', () => {
  it('refuses in docs/spec.md order: unknown, banned, in progress, not valid', () => {
    expect(judgeActivate(undefined, device, NOW)).toEqual({ ok: false, code: 'license_invalid' });
    expect(judgeActivate(key({ status: 'banned' }), device, NOW)).toEqual({ ok: false, code: 'license_banned' });
    expect(judgeActivate(key({ status: 'pending' }), device, NOW)).toEqual({ ok: false, code: 'license_in_progress' });
    expect(judgeActivate(key({ status: 'expired' as KeyFacts['status'] }), device, NOW)).toEqual({
      ok: false,
      code: 'license_not_valid',
    });
  });

  it('activates an unused key from now for its duration', () => {
    expect(judgeActivate(key(), device, NOW)).toEqual({
      ok: true,
      kind: 'first_use',
      expiresAt: new Date(NOW + 30 * DAY),
    });
    expect(judgeActivate(key({ durationUnit: 'hours', durationValue: 5 }), device, NOW)).toMatchObject({
      expiresAt: new Date(NOW + 5 * 3_600_000),
    });
  });

  it('a used key: another device under hwid_lock is refused before expiry is looked at', () => {
    const used = key({ status: 'used', usedBy: 'license-only', hwid: 'hwid-0001', expiresAt: new Date(NOW - DAY) });
    expect(judgeActivate(used, { hwid: 'hwid-0002', hwidLock: true, maxDevices: 1 }, NOW)).toEqual({
      ok: false,
      code: 'hwid_mismatch',
    });
    expect(judgeActivate(used, { hwid: 'hwid-0002', hwidLock: false, maxDevices: 1 }, NOW)).toEqual({
      ok: false,
      code: 'license_expired',
    });
    expect(judgeActivate(used, device, NOW)).toEqual({ ok: false, code: 'license_expired' });
  });

  it('a used, unexpired key returns with its own expiry, and says whether the device is new', () => {
    const used = key({ status: 'used', usedBy: 'license-only', hwid: 'hwid-0001', expiresAt: new Date(NOW + DAY) });
    expect(judgeActivate(used, device, NOW)).toEqual({
      ok: true,
      kind: 'returning',
      expiresAt: new Date(NOW + DAY),
      newDevice: false,
    });
    expect(judgeActivate(used, { hwid: 'hwid-0009', hwidLock: false, maxDevices: 1 }, NOW)).toMatchObject({
      ok: true,
      newDevice: true,
    });
    // No stored HWID yet (pinned at this use): not a mismatch even under hwid_lock.
    expect(judgeActivate(key({ status: 'used', usedBy: 'license-only', expiresAt: null }), device, NOW)).toMatchObject({
      ok: true,
      kind: 'returning',
    });
    // Exactly at expiry is still valid; a millisecond later is not.
    expect(judgeActivate(key({ status: 'used', usedBy: 'x', expiresAt: new Date(NOW) }), device, NOW)).toMatchObject({
      ok: true,
    });
  });
});
