// Every cryptographic primitive Keywarden uses lives here: Ed25519, Argon2id, randomness and
// constant-time compares from sodium-native; HMAC-SHA256, SHA-256 and AES-256-CBC from node:crypto
// (sodium-native 5 exposes no HMAC-SHA256 and libsodium has no AES-CBC).
import { createCipheriv, createHash, createHmac } from 'node:crypto';
import sodium from 'sodium-native';

export function randomBytes(n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  sodium.randombytes_buf(b);
  return b;
}

/** URL-safe random token: `bytes` random bytes, base64url without padding. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

export function sha256(data: string | Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export function hmacSha256(key: string | Uint8Array, data: string | Uint8Array): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/**
 * Constant-time equality. Unequal lengths return false after comparing against a same-length
 * copy, so the time spent does not depend on where the first difference is.
 */
export function constantTimeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  const ab = typeof a === 'string' ? Buffer.from(a) : a;
  const bb = typeof b === 'string' ? Buffer.from(b) : b;
  if (ab.byteLength !== bb.byteLength) {
    sodium.sodium_memcmp(ab, ab);
    return false;
  }
  if (ab.byteLength === 0) return true;
  return sodium.sodium_memcmp(ab, bb);
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

// ---- AES-256-CBC response encryption (PROTOCOL 5) -------------------------------------------

export function aes256CbcEncrypt(key: Uint8Array, iv: Uint8Array, plaintext: Uint8Array): Buffer {
  const cipher = createCipheriv('aes-256-cbc', key, iv);
  return Buffer.concat([cipher.update(plaintext), cipher.final()]);
}
