// What docs/spec.md's license tables decide, as pure functions over a key's facts (Keygen's ordered guard
// clauses): the order of the checks is the policy. No I/O; the license actor asks these, and the
// repository only runs the conditional writes that carry a verdict out.
import type { ErrorCode } from '../../errors.js';
import { durationMs, hasExpired, type DeviceFacts, type StoredKey } from '../keys/index.js';

/** A key as the policy sees it (read from its row at the start of every operation). */
export type KeyFacts = StoredKey;

type Refusal = { ok: false; code: ErrorCode };

/** unused, or used by an end user who was deleted since (docs/protocol.md 11.10): register may claim it. */
export function isClaimable(k: KeyFacts): boolean {
  return (
    k.status === 'unused' ||
    (k.status === 'used' && k.userId === null && k.usedBy !== '' && k.usedBy !== 'license-only')
  );
}

/** Expiry of a key activated now: its duration from now; null for lifetime. */
function expiryFrom(k: KeyFacts, now: number): Date | null {
  const ms = durationMs(k.durationValue, k.durationUnit);
  return ms === null ? null : new Date(now + ms);
}

/** docs/spec.md register errors, in order: unknown key, banned, already used. */
export function judgeRegister(k: KeyFacts | undefined): { ok: true; key: KeyFacts } | Refusal {
  if (!k) return { ok: false, code: 'license_invalid' };
  if (k.status === 'banned') return { ok: false, code: 'license_banned' };
  if (!isClaimable(k)) return { ok: false, code: 'license_used' };
  return { ok: true, key: k };
}

/** A registering user keeps the remaining time of a reclaimed key, else the key's duration from now. */
export function registeredExpiry(k: KeyFacts, now: number): Date | null {
  return k.expiresAt ?? expiryFrom(k, now);
}

type ActivateVerdict =
  | Refusal
  | { ok: true; kind: 'first_use'; expiresAt: Date | null }
  | { ok: true; kind: 'returning'; expiresAt: Date | null; newDevice: boolean };

/** A key used license-only holds its devices itself; a key registered by an end user pins one HWID (docs/spec.md). */
export function isLicenseOnly(k: KeyFacts): boolean {
  return k.usedBy === 'license-only';
}

/** docs/protocol.md 12.1: the devices a key (or its end user) may hold: its own max_devices, else the app's. */
export function deviceLimit(k: Pick<KeyFacts, 'maxDevices'>, appMaxDevices: number): number {
  return k.maxDevices ?? appMaxDevices;
}

/**
 * docs/spec.md license errors, in order: unknown key, banned, a claim in progress, not activatable,
 * then an unused key is activated; a used one must be allowed on the HWID (with hwid_lock) and be
 * unexpired. A license-only key accepts a HWID it holds, or a new one while it holds fewer than its
 * limit (docs/protocol.md 12.1; `devices` are its devices as read before the decision, the admission itself
 * is exact in the database); any other used key must match its pinned HWID.
 */
export function judgeActivate(
  k: KeyFacts | undefined,
  op: { hwid: string; hwidLock: boolean; maxDevices: number },
  now: number,
  devices?: DeviceFacts,
): ActivateVerdict {
  if (!k) return { ok: false, code: 'license_invalid' };
  if (k.status === 'banned') return { ok: false, code: 'license_banned' };
  if (k.status === 'pending') return { ok: false, code: 'license_in_progress' };
  if (k.status !== 'unused' && k.status !== 'used') return { ok: false, code: 'license_not_valid' };
  if (k.status === 'unused') return { ok: true, kind: 'first_use', expiresAt: expiryFrom(k, now) };
  const byDevices = isLicenseOnly(k) && devices !== undefined;
  if (op.hwidLock) {
    const refused = byDevices
      ? !devices.held && devices.bound >= deviceLimit(k, op.maxDevices)
      : k.hwid !== '' && k.hwid !== op.hwid;
    if (refused) return { ok: false, code: 'hwid_mismatch' };
  }
  if (hasExpired(k.expiresAt, k.durationUnit === 'lifetime', now)) return { ok: false, code: 'license_expired' };
  const newDevice = byDevices ? !devices.known : k.hwid !== op.hwid;
  return { ok: true, kind: 'returning', expiresAt: k.expiresAt, newDevice };
}
