// docs/protocol.md 3 (request signatures), 4 (response signatures) and 5 (response encryption).
import {
  aes256CbcEncrypt,
  constantTimeEqual,
  ed25519Sign,
  hmacSha256,
  responseEncryptionKey,
  sha256,
  sha256Hex,
} from '../crypto/index.js';
import type { ResponseSigningKey } from '../crypto/secrets.js';
import type { Reply } from './types.js';

export const TIMESTAMP_WINDOW_S = 300;
export const NONCE_TTL_MS = 600_000;
export const NONCE_FORMAT = /^[A-Za-z0-9_-]{16,64}$/;

/** canonical = METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)) */
export function canonicalRequest(
  method: string,
  path: string,
  timestamp: string,
  nonce: string,
  body: Uint8Array,
): string {
  return `${method.toUpperCase()}\n${path}\n${timestamp}\n${nonce}\n${sha256Hex(body)}`;
}

export function requestSignatureValid(apiSecret: string, canonical: string, signatureHex: string): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(signatureHex)) return false;
  return constantTimeEqual(hmacSha256(apiSecret, canonical).toString('hex'), signatureHex.toLowerCase());
}

/** message = "kw1" \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n hex(sha256(body)) */
export function responseMessage(
  kid: string,
  method: string,
  path: string,
  status: number,
  ts: string,
  nonce: string,
  body: Uint8Array,
): string {
  return `kw1\n${kid}\n${method.toUpperCase()}\n${path}\n${status}\n${ts}\n${nonce}\n${sha256Hex(body)}`;
}

export function signReply(
  reply: Reply,
  key: ResponseSigningKey,
  method: string,
  path: string,
  nonce: string,
  nowMs: number,
): Reply {
  const body = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
  const ts = String(Math.floor(nowMs / 1000));
  const sig = ed25519Sign(
    Buffer.from(responseMessage(key.kid, method, path, reply.status, ts, nonce, body)),
    key.secretKey,
  );
  return {
    status: reply.status,
    body,
    headers: {
      ...reply.headers,
      'X-Response-Kid': key.kid,
      'X-Response-Timestamp': ts,
      'X-Response-Signature': sig.toString('base64'),
    },
  };
}

/** {"enc": base64(AES-256-CBC(key = sha256(enc_key + "-" + api_secret), iv = sha256(init_iv)[0..16]))} */
export function encryptBody(plaintext: Uint8Array, encKey: string, apiSecret: string, initIv: string): Buffer {
  return encryptBodyWithKey(plaintext, responseEncryptionKey(encKey, apiSecret), initIv);
}

/** The same with the response key already derived (a session keeps the key, not the enc_key). */
export function encryptBodyWithKey(plaintext: Uint8Array, key: Uint8Array, initIv: string): Buffer {
  const iv = sha256(Buffer.from(initIv, 'utf8')).subarray(0, 16);
  return Buffer.from(JSON.stringify({ enc: aes256CbcEncrypt(key, iv, plaintext).toString('base64') }));
}
