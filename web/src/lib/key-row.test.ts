import { describe, expect, it } from 'vitest';
import { devicesLabel, entitlementChips } from './key-row.js';

const device = (hwid: string) => ({
  hwid,
  first_seen: '2026-01-01T00:00:00.000Z',
  last_seen: '2026-01-02T00:00:00.000Z',
});

describe('devicesLabel', () => {
  it("counts a key's devices against its own limit, else the application's, with HWID lock on", () => {
    const app = { max_devices: 3, hwid_lock: true };
    expect(devicesLabel({ devices: [device('a'), device('b')], max_devices: null }, app)).toEqual({
      label: '2 / 3 devices',
      title: '2 of at most 3 devices (the application’s limit)',
    });
    expect(devicesLabel({ devices: [], max_devices: 1 }, app)?.label).toBe('0 / 1 device');
    expect(devicesLabel({ devices: [device('a')], max_devices: 1000 }, app)?.title).toBe(
      '1 of at most 1,000 devices (this key’s limit)',
    );
  });
  it('shows no limit while HWID lock is off, and nothing where the devices are hidden', () => {
    expect(devicesLabel({ devices: [device('a')], max_devices: 2 }, { max_devices: 3, hwid_lock: false })?.label).toBe(
      '1 device',
    );
    expect(devicesLabel({ max_devices: null }, { max_devices: 3, hwid_lock: true })).toBeNull();
  });
});

describe('entitlementChips', () => {
  it('shows up to three codes, then "+N" for the rest', () => {
    expect(entitlementChips([])).toEqual({ shown: [], more: 0 });
    expect(entitlementChips(['a', 'b', 'c'])).toEqual({ shown: ['a', 'b', 'c'], more: 0 });
    expect(entitlementChips(['a', 'b', 'c', 'd', 'e'])).toEqual({ shown: ['a', 'b', 'c'], more: 2 });
  });
});
