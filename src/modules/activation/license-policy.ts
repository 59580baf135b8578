// What SPEC's license tables decide, as pure functions over a key's facts (Keygen's ordered guard
// clauses): the order of the checks is the policy. No I/O; the license actor asks these, and the
// repository only runs the conditional writes that carry a verdict out.
import type { ErrorCode } from '../../errors.js';
import type { StoredKey } from './license-ops.repository.js';
import { durationMs, hasExpired } from '../keys/index.js';

/** A key as the policy sees it (read from its row at the start of every operation). */
export type KeyFacts = StoredKey;

type Refusal = { ok: false; code: ErrorCode };

/** unused, or used by an end user who was deleted since (PROTOCOL 11.10): register may claim it. */
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

/** SPEC register errors, in order: unknown key, banned, already used. */
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

/**
 * SPEC license errors, in order: unknown key, banned, a claim in progress, not activatable,
 * then an unused key is activated; a used one must match the HWID (with hwid_lock) and be unexpired.
 */
export function judgeActivate(
  k: KeyFacts | undefined,
  op: { hwid: string; hwidLock: boolean },
  now: number,
): ActivateVerdict {
  if (!k) return { ok: false, code: 'license_invalid' };
  if (k.status === 'banned') return { ok: false, code: 'license_banned' };
  if (k.status === 'pending') return { ok: false, code: 'license_in_progress' };
  if (k.status !== 'unused' && k.status !== 'used') return { ok: false, code: 'license_not_valid' };
  if (k.status === 'unused') return { ok: true, kind: 'first_use', expiresAt: expiryFrom(k, now) };
  if (op.hwidLock && k.hwid !== '' && k.hwid !== op.hwid) return { ok: false, code: 'hwid_mismatch' };
  if (hasExpired(k.expiresAt, k.durationUnit === 'lifetime', now)) return { ok: false, code: 'license_expired' };
  return { ok: true, kind: 'returning', expiresAt: k.expiresAt, newDevice: k.hwid !== op.hwid };
}
