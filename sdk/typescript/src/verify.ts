// docs/protocol.md 4 response verification, in the order sdk/vectors/response-signatures.json fixes:
// headers present, kid pinned, signature encoding, freshness, Ed25519 over this request's nonce.
import type { KeyObject } from 'node:crypto';
import { decodeSignature, ed25519PublicKey, ed25519Verify, responseMessage } from './crypto.js';
import { verificationError } from './errors.js';
import type { ResponseKey } from './config.js';

export type PinnedKeys = ReadonlyMap<string, KeyObject>;

export function pinKeys(keys: readonly ResponseKey[]): PinnedKeys {
  return new Map(keys.map((k) => [k.kid, ed25519PublicKey(k.public_key)]));
}

export interface SignedAnswer {
  method: string;
  path: string;
  status: number;
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string | undefined>>;
  body: Uint8Array | string;
  /** The X-Nonce this client sent. */
  nonce: string;
}

/** Throws a `verification` KeywardenError, else returns the answer's timestamp in ms. */
export function verifyResponse(keys: PinnedKeys, a: SignedAnswer, nowMs: number, maxSkewSeconds: number): number {
  const kid = a.headers['x-response-kid'];
  const ts = a.headers['x-response-timestamp'];
  const sig = a.headers['x-response-signature'];
  if (!kid || !ts || !sig) throw verificationError('unsigned', `answer ${a.status} of ${a.path} carries no signature`);
  const key = keys.get(kid);
  if (!key) throw verificationError('unknown_kid', `answer of ${a.path} is signed by unpinned key ${kid}`);
  const signature = decodeSignature(sig);
  if (!signature) throw verificationError('bad_base64', `signature of ${a.path} is not base64 of 64 bytes`);
  if (!/^\d{1,12}$/.test(ts)) throw verificationError('stale', `timestamp ${ts} is not unix seconds`);
  const serverMs = Number(ts) * 1000;
  if (Math.abs(serverMs - nowMs) > maxSkewSeconds * 1000) {
    throw verificationError('stale', `timestamp ${ts} is ${Math.round((serverMs - nowMs) / 1000)} s off`);
  }
  const body = typeof a.body === 'string' ? Buffer.from(a.body, 'utf8') : a.body;
  if (!ed25519Verify(key, responseMessage(kid, a.method, a.path, a.status, ts, a.nonce, body), signature)) {
    throw verificationError('bad_signature', `signature of ${a.path} (${a.status}) does not verify`);
  }
  return serverMs;
}
