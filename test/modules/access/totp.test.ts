// TOTP as authenticator apps compute it: RFC 6238's SHA-1 test vectors (6-digit truncation), the
// base32 secret, the accepted window (previous, current, next step) and the otpauth URL's form.
import { describe, expect, it } from 'vitest';
import {
  base32Decode,
  base32Encode,
  matchTotp,
  newTotpSecret,
  otpauthUrl,
  totpCode,
  totpStep,
} from '../../../src/modules/access/totp.js';
import { totp } from '../../helpers/totp.js';

// RFC 6238 appendix B (SHA1, seed "12345678901234567890"), the last six digits of each 8-digit value.
const VECTORS: [number, string][] = [
  [59, '287082'],
  [1111111109, '081804'],
  [1111111111, '050471'],
  [1234567890, '005924'],
  [2000000000, '279037'],
  [20000000000, '353130'],
];
const SEED = Buffer.from('12345678901234567890');

describe('TOTP (RFC 6238, HMAC-SHA1, 6 digits, 30 s)', () => {
  it.each(VECTORS)('at %i s the code is %s', (seconds, code) => {
    expect(totpCode(SEED, totpStep(seconds * 1000))).toBe(code);
    // the test's own authenticator agrees
    expect(totp(base32Encode(SEED), 0, seconds * 1000)).toBe(code);
  });

  it('writes secrets in base32 (32 characters for 160 bits) and reads them back', () => {
    expect(base32Encode(SEED)).toBe('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ');
    const secret = newTotpSecret();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(base32Encode(base32Decode(secret)!)).toBe(secret);
    expect(base32Decode('not base32!')).toBeNull();
    expect(newTotpSecret()).not.toBe(secret);
  });

  it('accepts the previous, current and next step only, and answers which step matched', () => {
    const now = 1_800_000_000_000;
    const step = totpStep(now);
    for (const d of [-1, 0, 1]) expect(matchTotp(SEED, totpCode(SEED, step + d), now)).toBe(step + d);
    for (const d of [-3, -2, 2, 3]) expect(matchTotp(SEED, totpCode(SEED, step + d), now)).toBeNull();
    expect(matchTotp(SEED, '12345', now)).toBeNull();
    expect(matchTotp(SEED, '1234567', now)).toBeNull();
    expect(matchTotp(SEED, 'abcdef', now)).toBeNull();
  });

  it('spells the otpauth URL as docs/protocol.md 13.2 does', () => {
    expect(otpauthUrl('alice_1', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')).toBe(
      'otpauth://totp/Keywarden:alice_1?secret=ABCDEFGHIJKLMNOPQRSTUVWXYZ234567&issuer=Keywarden',
    );
  });
});
