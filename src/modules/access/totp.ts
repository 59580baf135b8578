// Time-based one-time passwords (RFC 6238 over RFC 4226) as authenticator apps make them: HMAC-SHA1,
// 6 digits, 30-second steps, the secret shown in base32 (RFC 4648, no padding). A code of the
// previous or next step is accepted too (clocks drift); that a code is used once is the caller's
// rule (two-factor.repository.ts keeps the last accepted step).
import { constantTimeEqual, hmacSha1, randomBytes } from '../../platform/crypto/index.js';

const STEP_SECONDS = 30;
const DIGITS = 6;
/** 160 bits, RFC 4226's recommendation: 32 base32 characters. */
const SECRET_BYTES = 20;
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const ISSUER = 'Keywarden';

export function base32Encode(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** The bytes of a base32 text (case and spaces ignored); null when it is not base32. */
export function base32Decode(text: string): Buffer | null {
  const clean = text.replace(/[\s=]/g, '').toUpperCase();
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of clean) {
    const v = BASE32.indexOf(ch);
    if (v < 0) return null;
    value = ((value << 5) | v) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** A fresh secret, base32. */
export function newTotpSecret(): string {
  return base32Encode(randomBytes(SECRET_BYTES));
}

/** The time step `nowMs` falls in. */
export function totpStep(nowMs: number): number {
  return Math.floor(nowMs / 1000 / STEP_SECONDS);
}

/** RFC 4226's HOTP of `step`: dynamic truncation of HMAC-SHA1, 6 decimal digits. */
export function totpCode(secret: Uint8Array, step: number): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = hmacSha1(secret, counter);
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** DIGITS).padStart(DIGITS, '0');
}

/**
 * The step whose code `code` is, among the previous, current and next; null when none. All three
 * are computed and compared in constant time, so the answer's timing says nothing of which matched.
 */
export function matchTotp(secret: Uint8Array, code: string, nowMs: number): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const now = totpStep(nowMs);
  let matched: number | null = null;
  for (const step of [now - 1, now, now + 1]) if (constantTimeEqual(totpCode(secret, step), code)) matched = step;
  return matched;
}

/** The otpauth:// URL authenticator apps scan (docs/protocol.md 13.2 spells it exactly). */
export function otpauthUrl(username: string, secret: string): string {
  return `otpauth://totp/${ISSUER}:${encodeURIComponent(username)}?secret=${secret}&issuer=${ISSUER}`;
}
