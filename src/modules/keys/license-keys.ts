// Pure rules of license keys: masks (docs/spec.md "Key generation" rules 1-2), durations and pricing
// (rules 3-4, docs/protocol.md 11.6), previews (docs/protocol.md 11.15). No I/O here.
import type { DurationUnit, KeyCosts } from '../../platform/db/entities/index.js';
import { randomBytes, hmacSha256 } from '../../platform/crypto/index.js';

const MASK_PLACEHOLDERS = new Set(['*', '#', 'X']);
export const DEFAULT_MASK = 'XXXXX-XXXXX-XXXXX-XXXXX-XXXXX';
export const DEFAULT_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
/** Key spaces up to this size are enumerated, so the generator knows exactly which keys are left. */
export const ENUMERABLE_KEY_SPACE = 16_384;

/** Character classes the generator offers; an alphabet is a union of some of them. */
export const ALPHABET_CLASSES = /^[A-Za-z0-9]+$/;

export function placeholderCount(mask: string): number {
  let n = 0;
  for (const ch of mask) if (MASK_PLACEHOLDERS.has(ch)) n++;
  return n;
}

/** How many distinct keys `mask` can produce over an alphabet of `alphabetSize` characters. */
export function keySpace(mask: string, alphabetSize: number): bigint {
  return BigInt(alphabetSize) ** BigInt(placeholderCount(mask));
}

/** Every key of a small key space, in order (callers check keySpace <= ENUMERABLE_KEY_SPACE first). */
export function* enumerateKeys(mask: string, alphabet: string): Generator<string> {
  const slots = placeholderCount(mask);
  const total = alphabet.length ** slots;
  for (let i = 0; i < total; i++) {
    const digits: string[] = [];
    for (let n = i, d = 0; d < slots; d++, n = Math.floor(n / alphabet.length))
      digits.push(alphabet[n % alphabet.length]!);
    let out = '';
    for (const ch of mask) out += MASK_PLACEHOLDERS.has(ch) ? digits.pop()! : ch;
    yield out;
  }
}

/** Removes duplicates, keeping first occurrences. */
export function normalizeAlphabet(alphabet: string): string {
  return [...new Set(alphabet)].join('');
}

/**
 * Fills every placeholder of `mask` with a uniformly random character of `alphabet` (rejection sampling,
 * no modulo bias).
 */
export function expandMask(mask: string, alphabet: string): string {
  const n = alphabet.length;
  const limit = 256 - (256 % n);
  let pool = randomBytes(64);
  let at = 0;
  const next = (): string => {
    for (;;) {
      if (at >= pool.length) {
        pool = randomBytes(64);
        at = 0;
      }
      const b = pool[at++]!;
      if (b < limit) return alphabet[b % n]!;
    }
  };
  let out = '';
  for (const ch of mask) out += MASK_PLACEHOLDERS.has(ch) ? next() : ch;
  return out;
}

/** `AB3D****9XYZ`: first four, four stars, last four (docs/protocol.md 11.15). */
export function keyPreview(key: string): string {
  return `${key.slice(0, 4)}****${key.slice(-4)}`;
}

const DAY_MS = 86_400_000;
const UNIT_MS: Record<Exclude<DurationUnit, 'lifetime'>, number> = {
  hours: 3_600_000,
  days: DAY_MS,
  weeks: 7 * DAY_MS,
  months: 30 * DAY_MS,
};

/** Days used for pricing and display: hours round up to at least one day; 0 means lifetime. */
export function durationDays(value: number, unit: DurationUnit): number {
  switch (unit) {
    case 'lifetime':
      return 0;
    case 'hours':
      return Math.max(1, Math.ceil(value / 24));
    case 'days':
      return value;
    case 'weeks':
      return value * 7;
    case 'months':
      return value * 30;
  }
}

/** Exact length of a key's validity in milliseconds; null for lifetime. */
export function durationMs(value: number, unit: DurationUnit): number | null {
  return unit === 'lifetime' ? null : value * UNIT_MS[unit];
}

/** docs/spec.md "Key generation" rule 4: exact tier, lifetime tier, days:30 pro rata, else 1 credit per key. */
export function pricePerKey(days: number, costs: KeyCosts): number {
  if (days === 0) {
    const lifetime = costs.lifetime;
    if (lifetime !== undefined) return lifetime;
  } else {
    const exact = costs[`days:${days}` as keyof KeyCosts];
    if (exact !== undefined) return exact;
  }
  const monthly = costs['days:30'];
  if (monthly !== undefined && monthly > 0) return Math.max(1, Math.ceil((days / 30) * monthly));
  return 1;
}

/** The keyed hash under which a key is stored and looked up (a database dump does not reveal keys). */
export function licenseHash(key: Buffer, plaintext: string): string {
  return hmacSha256(key, plaintext).toString('hex');
}
