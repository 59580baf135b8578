// What a Licenses table row says of a key's devices and entitlements (docs/protocol.md 12.1, 12.3).
import type { License } from '../api/responses.js';
import { formatCount, plural } from './plural.js';

/** A key's devices against its limit (docs/protocol.md 12.1); the limit counts only with HWID lock on. */
export function devicesLabel(
  k: Pick<License, 'devices' | 'max_devices'>,
  app: { max_devices: number; hwid_lock: boolean },
): { label: string; title: string } | null {
  if (k.devices === undefined) return null; // hidden with hwid
  const n = k.devices.length;
  if (!app.hwid_lock)
    return { label: plural(n, 'device'), title: `${plural(n, 'device')} seen; no limit while HWID lock is off` };
  const limit = k.max_devices ?? app.max_devices;
  const whose = k.max_devices == null ? 'the application’s' : 'this key’s';
  return {
    label: `${formatCount(n)} / ${plural(limit, 'device')}`,
    title: `${formatCount(n)} of at most ${plural(limit, 'device')} (${whose} limit)`,
  };
}

/** Entitlement codes shown on a row: the first `max`, and how many more the chip "+N" stands for. */
export function entitlementChips(codes: readonly string[], max = 3): { shown: string[]; more: number } {
  return codes.length <= max
    ? { shown: [...codes], more: 0 }
    : { shown: codes.slice(0, max), more: codes.length - max };
}
