// Sealed client-session tokens: an unactivated session is its own token, so `init` stores nothing
// and opening sessions costs the worker no memory. docs/protocol.md 2 still holds from the client's side:
// 32 bytes that look random, base64url, 43 characters, refused after 24 hours with the same 401 as
// an unknown session.
//
//   plaintext (28 bytes) = app id (16, the UUID's bytes) | meta (4, big-endian: bit 31 = "an
//                          enc_key was stored for this token", bits 0-30 = seconds since EPOCH_S)
//                          | random (8)
//   token (32 bytes)     = tag (4) | plaintext XOR keystream (28)
//   tag                  = first 4 bytes of keyed BLAKE2b(macKey, plaintext)
//   keystream            = first 28 bytes of keyed BLAKE2b(encKey, tag)
//
// A synthetic-IV construction (SIV, RFC 5297's shape with BLAKE2b as both PRFs): the tag
// authenticates the whole plaintext and is the IV of the encryption, so a token is valid only as
// the server wrote it. Two sizes are deliberate, and their sum is fixed by the 32 bytes:
// - random, 64 bits, decides whether two inits of one app in one second could get the same token
//   (and so share a session); an attacker opening A sessions while victims open V in the same
//   second of the same app hits one of theirs with probability A*V/2^64.
// - tag, 32 bits, decides forgery: 2^32 online guesses per valid token on average. What a forgery
//   gains is an unactivated session for an app whose api_key every client carries anyway, which
//   one `init` gives for free; every check init makes (version, hash, binary token) is on values
//   the client itself sends. A guess at random decodes to a random app id, which names no app.
import {
  KEYED_HASH_MIN_BYTES,
  constantTimeEqual,
  hkdfSha256,
  keyedHashInto,
  randomBytes,
} from '../../platform/crypto/index.js';

export const TOKEN_BYTES = 32;
const TOKEN_RANDOM_BYTES = 8;
const TAG_BYTES = 4;
const APP_BYTES = 16;
const PLAIN_BYTES = TOKEN_BYTES - TAG_BYTES; // 28
/** 2024-01-01T00:00:00Z: 31 bits of seconds from here last until 2092. */
const EPOCH_S = 1_704_067_200;
const KEYED_FLAG = 0x8000_0000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface TokenClaims {
  appId: string;
  /** Unix milliseconds, whole seconds (the token keeps seconds). */
  createdAt: number;
  /** An enc_key's response key was stored for this token at init (unactivated-keys.ts). */
  keyed: boolean;
}

export class SessionTokenCodec {
  private readonly macKey: Buffer;
  private readonly encKey: Buffer;
  // Scratch buffers: every call runs to completion synchronously, so one set per codec suffices.
  private readonly mac = Buffer.alloc(KEYED_HASH_MIN_BYTES);
  private readonly stream = Buffer.alloc(32);
  private readonly plain = Buffer.alloc(PLAIN_BYTES);

  /** `key`: the deployment's session-token key (Secrets.sessionTokenKey), 32 bytes. */
  constructor(key: Uint8Array) {
    if (key.byteLength < 32) throw new Error('the session-token key is at least 32 bytes');
    this.macKey = hkdfSha256(key, 'mac', 32);
    this.encKey = hkdfSha256(key, 'enc', 32);
  }

  /** A token for these claims; `random` (8 bytes) makes two seals of the same claims differ. */
  seal(claims: TokenClaims, random: Uint8Array = randomBytes(TOKEN_RANDOM_BYTES)): string {
    if (!UUID.test(claims.appId)) throw new Error(`not a canonical UUID: ${claims.appId}`);
    if (random.byteLength !== TOKEN_RANDOM_BYTES) throw new Error(`random is ${TOKEN_RANDOM_BYTES} bytes`);
    const seconds = Math.floor(claims.createdAt / 1000) - EPOCH_S;
    if (seconds < 0 || seconds >= KEYED_FLAG) throw new Error('createdAt outside the token epoch');
    const p = this.plain;
    p.write(claims.appId.replaceAll('-', ''), 0, APP_BYTES, 'hex');
    p.writeUInt32BE((seconds | (claims.keyed ? KEYED_FLAG : 0)) >>> 0, APP_BYTES);
    p.set(random, APP_BYTES + 4);
    const out = Buffer.allocUnsafe(TOKEN_BYTES);
    keyedHashInto(this.mac, p, this.macKey);
    this.mac.copy(out, 0, 0, TAG_BYTES);
    this.keystream(out.subarray(0, TAG_BYTES));
    for (let i = 0; i < PLAIN_BYTES; i++) out[TAG_BYTES + i] = p[i]! ^ this.stream[i]!;
    return out.toString('base64url');
  }

  /** The claims of a token this deployment sealed; null for anything else (tampered, foreign, junk). */
  open(token: string): TokenClaims | null {
    if (token.length !== 43) return null;
    const t = Buffer.from(token, 'base64url');
    // Node ignores the unused low bits of the last character: only the canonical spelling counts,
    // so one session has exactly one token string (its store key and its shard).
    if (t.byteLength !== TOKEN_BYTES || t.toString('base64url') !== token) return null;
    const tag = t.subarray(0, TAG_BYTES);
    this.keystream(tag);
    const p = this.plain;
    for (let i = 0; i < PLAIN_BYTES; i++) p[i] = t[TAG_BYTES + i]! ^ this.stream[i]!;
    keyedHashInto(this.mac, p, this.macKey);
    if (!constantTimeEqual(this.mac.subarray(0, TAG_BYTES), tag)) return null;
    const meta = p.readUInt32BE(APP_BYTES);
    const hex = p.toString('hex', 0, APP_BYTES);
    return {
      appId: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
      createdAt: ((meta & ~KEYED_FLAG) + EPOCH_S) * 1000,
      keyed: (meta & KEYED_FLAG) !== 0,
    };
  }

  private keystream(tag: Uint8Array): void {
    keyedHashInto(this.stream, tag, this.encKey);
  }
}
