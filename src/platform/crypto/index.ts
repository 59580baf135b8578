// Every cryptographic primitive Keywarden uses lives here: Ed25519, X25519, Argon2id, secretbox
// (XSalsa20-Poly1305), randomness and constant-time compares from sodium-native; HMAC-SHA256,
// HMAC-SHA1 (TOTP, RFC 6238), HKDF-SHA256, SHA-256 and AES-256-CBC from node:crypto (sodium-native 5
// exposes no HMAC-SHA256 with a key of any length, HMAC-SHA1 or HKDF, and libsodium has no AES-CBC).
import * as nodeCrypto from 'node:crypto';
import { createCipheriv, createHash, createHmac, hkdfSync } from 'node:crypto';
import sodium from 'sodium-native';

// Small draws come from a pool filled 4 KiB at a time: libsodium asks the kernel (getrandom) on
// every call, and a system call per heartbeat token cost more than the rest of the token. Each
// pooled byte is handed out once and wiped as it leaves; the pool never leaves this module.
const POOL_BYTES = 4096;
const POOLED_MAX = 64;
const pool = Buffer.allocUnsafeSlow(POOL_BYTES);
let poolAt = POOL_BYTES;

/** The offset in `pool` of `n` (<= POOLED_MAX) fresh random bytes, which the caller reads before any other draw. */
function draw(n: number): number {
  if (poolAt + n > POOL_BYTES) {
    sodium.randombytes_buf(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += n;
  return at;
}

export function randomBytes(n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  if (n > POOLED_MAX) {
    sodium.randombytes_buf(b);
    return b;
  }
  const at = draw(n);
  pool.copy(b, 0, at, at + n);
  pool.fill(0, at, at + n);
  return b;
}

function randomString(bytes: number, encoding: 'hex' | 'base64url'): string {
  if (bytes > POOLED_MAX) return randomBytes(bytes).toString(encoding);
  const at = draw(bytes);
  const s = pool.toString(encoding, at, at + bytes);
  pool.fill(0, at, at + bytes);
  return s;
}

/** URL-safe random token: `bytes` random bytes, base64url without padding. */
export function randomToken(bytes = 32): string {
  return randomString(bytes, 'base64url');
}

export function randomHex(bytes: number): string {
  return randomString(bytes, 'hex');
}

/**
 * node:crypto's one-shot hash, no Hash object per call. Node.js 20.10 and 20.11 lack it: read off
 * the namespace, since a named import of a missing export would fail to load.
 */
const oneShot = (nodeCrypto as { hash?: typeof nodeCrypto.hash }).hash;

export function sha256(data: string | Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

export function sha256Hex(data: string | Uint8Array): string {
  return oneShot ? oneShot('sha256', data, 'hex') : createHash('sha256').update(data).digest('hex');
}

// HMAC-SHA256 (RFC 2104) as two one-shot SHA-256 calls (node:crypto's `hash`, OpenSSL's SHA-256)
// on scratch blocks: the heartbeat proofs and the channel's frame MACs take three per beat, and an
// Hmac object costs more than the hashing for inputs this short. Longer keys or data, and Node.js
// builds before 20.12 (no `hash`), take the Hmac object: same result.
const SHA256_BLOCK = 64;
const HMAC_SCRATCH_DATA = 2048;
/** (key ^ ipad) || data */
const hmacInner = Buffer.allocUnsafeSlow(SHA256_BLOCK + HMAC_SCRATCH_DATA);
/** (key ^ opad) || inner hash */
const hmacOuter = Buffer.allocUnsafeSlow(SHA256_BLOCK + 32);

/** The outer block of HMAC(key, data), ready to hash; false when the scratch cannot take them. */
function hmacBlocks(key: string | Uint8Array, data: string | Uint8Array): boolean {
  if (!oneShot) return false;
  const keyBytes = typeof key === 'string' ? Buffer.byteLength(key) : key.byteLength;
  const dataBytes = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  if (keyBytes > SHA256_BLOCK || dataBytes > HMAC_SCRATCH_DATA) return false;
  if (typeof key === 'string') hmacOuter.write(key, 0, 'utf8');
  else hmacOuter.set(key, 0);
  hmacOuter.fill(0, keyBytes, SHA256_BLOCK);
  for (let i = 0; i < SHA256_BLOCK; i++) {
    const k = hmacOuter[i]!;
    hmacInner[i] = k ^ 0x36;
    hmacOuter[i] = k ^ 0x5c;
  }
  if (typeof data === 'string') hmacInner.write(data, SHA256_BLOCK, 'utf8');
  else hmacInner.set(data, SHA256_BLOCK);
  hmacOuter.write(oneShot('sha256', hmacInner.subarray(0, SHA256_BLOCK + dataBytes), 'binary'), SHA256_BLOCK, 'latin1');
  // No key material stays behind in the inner block; the outer one is wiped once hashed.
  hmacInner.fill(0, 0, SHA256_BLOCK);
  return true;
}

function hmacOuterHash(encoding: 'binary' | 'base64'): string {
  const mac = oneShot!('sha256', hmacOuter, encoding);
  hmacOuter.fill(0, 0, SHA256_BLOCK);
  return mac;
}

export function hmacSha256(key: string | Uint8Array, data: string | Uint8Array): Buffer {
  const mac = Buffer.allocUnsafe(32);
  hmacSha256Into(mac, key, data);
  return mac;
}

/** HMAC-SHA256 of `data` written into out[0..32] (a frame's MAC field, say). */
export function hmacSha256Into(out: Buffer, key: string | Uint8Array, data: string | Uint8Array): void {
  if (hmacBlocks(key, data)) out.write(hmacOuterHash('binary'), 0, 'latin1');
  else out.set(createHmac('sha256', key).update(data).digest());
}

/** HMAC-SHA256 as base64 (the heartbeat proofs). */
export function hmacSha256Base64(key: string | Uint8Array, data: string | Uint8Array): string {
  return hmacBlocks(key, data) ? hmacOuterHash('base64') : createHmac('sha256', key).update(data).digest('base64');
}

/** HMAC-SHA512: only where a foreign contract fixes it (shops' fulfilment webhooks, docs/protocol.md 14.6). */
export function hmacSha512(key: string | Uint8Array, data: string | Uint8Array): Buffer {
  return createHmac('sha512', key).update(data).digest();
}

/** HMAC-SHA1: only for TOTP codes (RFC 6238 fixes SHA-1 for the authenticator apps in use). */
export function hmacSha1(key: Uint8Array, data: Uint8Array): Buffer {
  return createHmac('sha1', key).update(data).digest();
}

/** HKDF-SHA256 (RFC 5869) without salt: a key for one purpose (`info`) from a long-lived secret. */
export function hkdfSha256(secret: Uint8Array, info: string, bytes: number): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, bytes));
}

export const KEYED_HASH_MIN_BYTES = sodium.crypto_generichash_BYTES_MIN;

/**
 * Keyed BLAKE2b (libsodium crypto_generichash): a PRF and MAC. `out` is 16 to 64 bytes and is
 * filled in place, so hot paths can reuse one buffer. `key` is 16 to 64 bytes.
 */
export function keyedHashInto(out: Uint8Array, data: Uint8Array, key: Uint8Array): void {
  sodium.crypto_generichash(out, data, key);
}

export const SHORT_HASH_KEY_BYTES = sodium.crypto_shorthash_KEYBYTES;

/**
 * SipHash-2-4 (libsodium crypto_shorthash): 8 bytes into `out`, keyed with 16 bytes. Keys of an
 * in-memory table: without the key nobody can pick inputs that collide.
 */
export function shortHashInto(out: Uint8Array, data: Uint8Array, key: Uint8Array): void {
  sodium.crypto_shorthash(out, data, key);
}

/**
 * Constant-time equality. Unequal lengths return false after comparing against a same-length
 * copy, so the time spent does not depend on where the first difference is.
 */
export function constantTimeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  if (typeof a === 'string' && typeof b === 'string') return stringsEqual(a, b);
  const ab = typeof a === 'string' ? Buffer.from(a) : a;
  const bb = typeof b === 'string' ? Buffer.from(b) : b;
  if (ab.byteLength !== bb.byteLength) {
    sodium.sodium_memcmp(ab, ab);
    return false;
  }
  if (ab.byteLength === 0) return true;
  return sodium.sodium_memcmp(ab, bb);
}

/**
 * Two strings compared code unit by code unit with no early exit (a token per heartbeat: no
 * buffers to encode). Unequal lengths compare `a` with itself first, as above.
 */
function stringsEqual(a: string, b: string): boolean {
  const other = a.length === b.length ? b : a;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ other.charCodeAt(i);
  return diff === 0 && other === b;
}

// ---- secretbox (XSalsa20-Poly1305): secrets stored encrypted at rest ------------------------

export const SECRETBOX_KEY_BYTES = sodium.crypto_secretbox_KEYBYTES;

/** Encrypts and authenticates `plaintext` under a 32-byte key: a random nonce followed by the box. */
export function secretboxSeal(plaintext: Uint8Array, key: Uint8Array): Buffer {
  const nonce = randomBytes(sodium.crypto_secretbox_NONCEBYTES);
  const box = Buffer.alloc(plaintext.byteLength + sodium.crypto_secretbox_MACBYTES);
  sodium.crypto_secretbox_easy(box, plaintext, nonce, key);
  return Buffer.concat([nonce, box]);
}

/** The plaintext of a sealed value, or null when it was altered or sealed under another key. */
export function secretboxOpen(sealed: Uint8Array, key: Uint8Array): Buffer | null {
  const n = sodium.crypto_secretbox_NONCEBYTES;
  if (sealed.byteLength < n + sodium.crypto_secretbox_MACBYTES) return null;
  const box = sealed.subarray(n);
  const out = Buffer.alloc(box.byteLength - sodium.crypto_secretbox_MACBYTES);
  return sodium.crypto_secretbox_open_easy(out, box, sealed.subarray(0, n), key) ? out : null;
}

// ---- Ed25519 -------------------------------------------------------------------------------

export interface SigningKeyPair {
  readonly publicKey: Buffer;
  readonly secretKey: Buffer;
}

export const ED25519_SEED_BYTES = 32;

export function signingKeyFromSeed(seed: Uint8Array): SigningKeyPair {
  if (seed.byteLength !== sodium.crypto_sign_SEEDBYTES) {
    throw new Error(`an Ed25519 seed is ${sodium.crypto_sign_SEEDBYTES} bytes, got ${seed.byteLength}`);
  }
  const publicKey = Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES);
  const secretKey = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  sodium.crypto_sign_seed_keypair(publicKey, secretKey, seed);
  return { publicKey, secretKey };
}

export function ed25519Sign(message: Uint8Array, secretKey: Uint8Array): Buffer {
  const sig = Buffer.allocUnsafe(sodium.crypto_sign_BYTES);
  sodium.crypto_sign_detached(sig, message, secretKey);
  return sig;
}

// ---- Argon2id (always the async variants: they run on libuv's pool, never on the event loop) --

const PWHASH_OPS = sodium.crypto_pwhash_OPSLIMIT_INTERACTIVE;
const PWHASH_MEM = sodium.crypto_pwhash_MEMLIMIT_INTERACTIVE;

export async function hashPassword(password: string): Promise<string> {
  const out = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
  await sodium.crypto_pwhash_str_async(out, Buffer.from(password, 'utf8'), PWHASH_OPS, PWHASH_MEM);
  return out.toString('utf8').replace(/\0+$/, '');
}

export async function verifyPassword(hash: string, password: string): Promise<boolean> {
  if (password.length === 0) return false;
  const str = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
  const encoded = Buffer.from(hash, 'utf8');
  if (encoded.byteLength >= str.byteLength) return false;
  encoded.copy(str);
  return sodium.crypto_pwhash_str_verify_async(str, Buffer.from(password, 'utf8'));
}

let dummyHash: Promise<string> | undefined;
/**
 * Verifies `password` against a throwaway hash. Used for unknown usernames so that a miss costs
 * the same Argon2id work as a wrong password and usernames don't leak through timing.
 */
export async function burnPasswordCheck(password: string): Promise<false> {
  dummyHash ??= hashPassword(randomToken(16));
  await verifyPassword(await dummyHash, password.length > 0 ? password : 'x');
  return false;
}

// ---- AES-256-CBC response encryption (docs/protocol.md 5) -------------------------------------------

/** docs/protocol.md 5's response key: sha256(utf8(enc_key "-" api_secret)). */
export function responseEncryptionKey(encKey: string, apiSecret: string): Buffer {
  return sha256(Buffer.from(`${encKey}-${apiSecret}`, 'utf8'));
}

export function aes256CbcEncrypt(key: Uint8Array, iv: Uint8Array, plaintext: Uint8Array): Buffer {
  const cipher = createCipheriv('aes-256-cbc', key, iv);
  return Buffer.concat([cipher.update(plaintext), cipher.final()]);
}

export function ed25519Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.byteLength !== sodium.crypto_sign_BYTES || publicKey.byteLength !== sodium.crypto_sign_PUBLICKEYBYTES)
    return false;
  return sodium.crypto_sign_verify_detached(signature, message, publicKey);
}

// ---- X25519 key agreement and key derivation (the realtime channel's handshake) -------------

export const X25519_BYTES = 32;

export interface X25519KeyPair {
  readonly publicKey: Buffer;
  readonly secretKey: Buffer;
}

/** The X25519 public key of a 32-byte secret (any 32 bytes: the scalar is clamped by X25519 itself). */
export function x25519PublicKey(secretKey: Uint8Array): Buffer {
  if (secretKey.byteLength !== sodium.crypto_scalarmult_SCALARBYTES) throw new Error('an X25519 secret is 32 bytes');
  const pk = Buffer.alloc(sodium.crypto_scalarmult_BYTES);
  sodium.crypto_scalarmult_base(pk, secretKey);
  return pk;
}

/** A fresh ephemeral key pair. */
export function x25519KeyPair(): X25519KeyPair {
  const secretKey = randomBytes(sodium.crypto_scalarmult_SCALARBYTES);
  return { publicKey: x25519PublicKey(secretKey), secretKey };
}

/**
 * The X25519 shared secret; null when the peer's key is malformed or of low order (the result
 * would be all zeros, which libsodium refuses: such a key would let a peer force a known secret).
 */
export function x25519(secretKey: Uint8Array, peerPublicKey: Uint8Array): Buffer | null {
  if (peerPublicKey.byteLength !== sodium.crypto_scalarmult_BYTES) return null;
  const q = Buffer.alloc(sodium.crypto_scalarmult_BYTES);
  try {
    sodium.crypto_scalarmult(q, secretKey, peerPublicKey);
  } catch {
    return null;
  }
  return q;
}

/** RFC 5869 HKDF with SHA-256 and a salt (the channel salts with its handshake transcript's hash). */
export function hkdfSha256Salted(ikm: Uint8Array, salt: Uint8Array, info: string, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from(info, 'utf8'), length));
}
