// An authenticator app for tests: RFC 6238 codes computed here with node:crypto, independently of
// the server's own implementation (src/modules/access/totp.ts), so the two check each other.
import { createHmac } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function fromBase32(text: string): Buffer {
  const bits = [...text.toUpperCase()].map((c) => ALPHABET.indexOf(c).toString(2).padStart(5, '0')).join('');
  const bytes: number[] = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) bytes.push(parseInt(bits.slice(i, i + 8), 2));
  return Buffer.from(bytes);
}

/** The 6-digit code of `secret` (base32) at `step` steps from now (-1 the previous, +1 the next). */
export function totp(secret: string, step = 0, nowMs = Date.now()): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(nowMs / 30_000) + step));
  const mac = createHmac('sha1', fromBase32(secret)).update(counter).digest();
  const o = mac[19]! & 15;
  return String((mac.readUInt32BE(o) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

/** The secret inside an otpauth:// URL. */
export function secretOf(otpauthUrl: string): string {
  return new URL(otpauthUrl).searchParams.get('secret')!;
}
