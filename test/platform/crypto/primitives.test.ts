// The primitives the hot path builds by hand: HMAC-SHA256 on one-shot SHA-256 must equal
// node:crypto's Hmac for every key and data length (both sides of the 64-byte key block and of the
// scratch size, strings in UTF-8), the pooled random draws must never hand a byte out twice, and the
// string compare must agree with plain equality.
import { createHmac, randomBytes as nodeRandomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  constantTimeEqual,
  hmacSha256,
  hmacSha256Base64,
  randomBytes,
  randomHex,
  randomToken,
} from '../../../src/platform/crypto/index.js';

const reference = (key: string | Uint8Array, data: string | Uint8Array) =>
  createHmac('sha256', key).update(data).digest('hex');

describe('hmacSha256', () => {
  it('equals node:crypto for keys of 0 to 130 bytes and data of 0 to 2,100 bytes', () => {
    for (const keyBytes of [0, 1, 31, 32, 34, 63, 64, 65, 100, 130]) {
      for (const dataBytes of [0, 1, 55, 56, 64, 119, 200, 2047, 2048, 2049, 2100]) {
        const key = nodeRandomBytes(keyBytes);
        const data = nodeRandomBytes(dataBytes);
        expect(hmacSha256(key, data).toString('hex'), `${keyBytes}/${dataBytes}`).toBe(reference(key, data));
      }
    }
  });

  it('takes strings as UTF-8, keys and data alike', () => {
    const cases: [string, string][] = [
      ['TT0123456789abcdef0123456789abcdef', 'kwhb1\nsession\n3\nTT00\n3'],
      ['clé-ü-😀', 'données ✓ 😀'],
      ['é'.repeat(32), 'x'], // 64 bytes in UTF-8: still one block
      ['é'.repeat(33), 'x'], // 66 bytes: hashed first
      ['k', 'ü'.repeat(1024)], // 2,048 bytes
      ['k', 'ü'.repeat(1025)], // 2,050 bytes
    ];
    for (const [key, data] of cases) expect(hmacSha256(key, data).toString('hex')).toBe(reference(key, data));
  });

  it('is not changed by the call before it (no key or data left behind in the scratch)', () => {
    const first = hmacSha256('a much longer key than the next one, 52 bytes long..', 'long data '.repeat(50));
    const short = hmacSha256('k', 'd');
    expect(short.toString('hex')).toBe(reference('k', 'd'));
    expect(first.toString('hex')).toBe(
      reference('a much longer key than the next one, 52 bytes long..', 'long data '.repeat(50)),
    );
  });
});

describe('pooled random draws', () => {
  it('never repeats a draw across several refills of the pool', () => {
    const seen = new Set<string>();
    // 16 bytes each: 1,000 draws cross the 4 KiB pool four times.
    for (let i = 0; i < 1000; i++) seen.add(randomHex(16));
    for (let i = 0; i < 300; i++) seen.add(randomToken(32));
    for (let i = 0; i < 300; i++) seen.add(randomBytes(24).toString('hex'));
    expect(seen.size).toBe(1600);
  });

  it('draws the asked length, pooled or not, and fresh buffers that are not views of the pool', () => {
    for (const n of [1, 16, 63, 64, 65, 200, 5000]) expect(randomBytes(n)).toHaveLength(n);
    expect(randomHex(16)).toMatch(/^[0-9a-f]{32}$/);
    expect(randomToken()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const a = randomBytes(32);
    const copy = Buffer.from(a);
    for (let i = 0; i < 200; i++) randomBytes(32); // refills the pool under `a`, were it a view
    expect(a.equals(copy)).toBe(true);
  });

  it('spreads bytes evenly (no stuck or zeroed pool)', () => {
    const counts = new Array<number>(256).fill(0);
    for (let i = 0; i < 4096; i++) for (const b of randomBytes(16)) counts[b]!++;
    // 65,536 bytes: 256 expected per value; a zeroed or reused pool would pile up on a few.
    expect(Math.min(...counts)).toBeGreaterThan(150);
    expect(Math.max(...counts)).toBeLessThan(380);
  });
});

describe('hmacSha256Base64', () => {
  it('equals node:crypto in base64, short inputs and long', () => {
    for (const [key, data] of [
      ['TT0123456789abcdef0123456789abcdef', 'kwhb1\nsession\n3\nTT00\n3'],
      ['k'.repeat(65), 'd'],
      ['k', 'd'.repeat(3000)],
    ] as const)
      expect(hmacSha256Base64(key, data)).toBe(createHmac('sha256', key).update(data).digest('base64'));
  });
});

describe('constantTimeEqual', () => {
  it('compares strings, buffers and both mixed by content', () => {
    const t = 'TT0123456789abcdef0123456789abcdef';
    expect(constantTimeEqual(t, `${t.slice(0, 20)}${t.slice(20)}`)).toBe(true);
    expect(constantTimeEqual(t, `${t.slice(0, 33)}0`)).toBe(false);
    expect(constantTimeEqual(t, `X${t.slice(1)}`)).toBe(false);
    expect(constantTimeEqual(t, t.slice(0, 33))).toBe(false);
    expect(constantTimeEqual(t.slice(0, 33), t)).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
    expect(constantTimeEqual('', 'a')).toBe(false);
    expect(constantTimeEqual('clé', 'clé')).toBe(true);
    expect(constantTimeEqual('clé', 'cle')).toBe(false);
    expect(constantTimeEqual(Buffer.from('clé'), 'clé')).toBe(true);
    expect(constantTimeEqual('abc', Buffer.from('abd'))).toBe(false);
  });
});
