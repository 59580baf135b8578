// Sealed client-session tokens: docs/protocol.md 2's shape, a round trip, and nothing but the
// exact token this deployment wrote opens: every single-bit change, another key, junk, and the
// non-canonical spelling of the same bytes are refused.
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SessionTokenCodec, TOKEN_BYTES } from '../../../src/modules/client/session-token.js';
import { hkdfSha256 } from '../../../src/platform/crypto/index.js';
import { SESSION_TOKEN_KEY_INFO } from '../../../src/platform/crypto/secrets.js';

const key = randomBytes(32);
const codec = new SessionTokenCodec(key);
const appId = randomUUID();
const createdAt = Math.floor(Date.now() / 1000) * 1000;

describe('session token codec', () => {
  it('seals 32 bytes as 43 base64url characters and opens them to the same claims', () => {
    for (const keyed of [false, true]) {
      const token = codec.seal({ appId, createdAt, keyed });
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token, 'base64url')).toHaveLength(TOKEN_BYTES);
      expect(codec.open(token)).toEqual({ appId, createdAt, keyed });
    }
  });

  it('keeps whole seconds and accepts any canonical UUID', () => {
    const id = '00000000-0000-4000-8000-ffffffffffff';
    expect(codec.open(codec.seal({ appId: id, createdAt: createdAt + 999, keyed: false }))).toEqual({
      appId: id,
      createdAt,
      keyed: false,
    });
    expect(() => codec.seal({ appId: id.toUpperCase(), createdAt, keyed: false })).toThrow(/UUID/);
  });

  it('two seals of the same claims differ (the random part), and look unrelated', () => {
    const a = codec.seal({ appId, createdAt, keyed: false });
    const b = codec.seal({ appId, createdAt, keyed: false });
    expect(a).not.toBe(b);
    // No byte position is shared systematically: the tag changes, and with it the whole keystream.
    const ba = Buffer.from(a, 'base64url');
    const bb = Buffer.from(b, 'base64url');
    let same = 0;
    for (let i = 0; i < TOKEN_BYTES; i++) if (ba[i] === bb[i]) same++;
    expect(same).toBeLessThan(8);
  });

  it('the same claims and random give the same token (deterministic, so the random part is what separates sessions)', () => {
    const r = randomBytes(8);
    expect(codec.seal({ appId, createdAt, keyed: true }, r)).toBe(codec.seal({ appId, createdAt, keyed: true }, r));
  });

  it('refuses every single-bit flip of the 32 bytes', () => {
    const token = Buffer.from(codec.seal({ appId, createdAt, keyed: true }), 'base64url');
    for (let bit = 0; bit < TOKEN_BYTES * 8; bit++) {
      const t = Buffer.from(token);
      t[bit >> 3]! ^= 1 << (bit & 7);
      expect(codec.open(t.toString('base64url')), `bit ${bit}`).toBeNull();
    }
  });

  it('refuses the same bytes spelled with other unused low bits in the last character', () => {
    const token = codec.seal({ appId, createdAt, keyed: false });
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(token[42]!);
    const variants = [1, 2, 3].map((low) => token.slice(0, 42) + alphabet[(last & ~3) | ((last + low) & 3)]);
    for (const v of variants) {
      expect(Buffer.from(v, 'base64url').equals(Buffer.from(token, 'base64url'))).toBe(true);
      expect(codec.open(v)).toBeNull();
    }
  });

  it("refuses another deployment's token, junk and wrong lengths", () => {
    const other = new SessionTokenCodec(randomBytes(32));
    expect(other.open(codec.seal({ appId, createdAt, keyed: false }))).toBeNull();
    expect(codec.open('A'.repeat(43))).toBeNull();
    expect(codec.open('Z'.repeat(43))).toBeNull();
    expect(codec.open(randomBytes(32).toString('base64url'))).toBeNull();
    expect(codec.open(codec.seal({ appId, createdAt, keyed: false }).slice(0, 42))).toBeNull();
    expect(codec.open('!'.repeat(43))).toBeNull();
  });

  it('random 32-byte strings essentially never open (the tag is 32 bits)', () => {
    let opened = 0;
    for (let i = 0; i < 20_000; i++) if (codec.open(randomBytes(32).toString('base64url'))) opened++;
    expect(opened).toBe(0);
  });

  it('the deployment key is derived from the signing seed under its own label', () => {
    const seed = randomBytes(32);
    const k = hkdfSha256(seed, SESSION_TOKEN_KEY_INFO, 32);
    expect(k).toHaveLength(32);
    expect(k.equals(seed)).toBe(false);
    expect(k.equals(hkdfSha256(seed, 'another label', 32))).toBe(false);
  });
});
