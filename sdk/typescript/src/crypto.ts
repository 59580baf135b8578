// docs/protocol.md 3-6 and the realtime channel with node:crypto only. Each function matches one section of
// sdk/vectors.
import {
  createDecipheriv,
  createHash,
  createHmac,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  timingSafeEqual,
  verify,
  type KeyObject,
} from 'node:crypto';

export const sha256Hex = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

/** docs/protocol.md 3: METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)). */
export function canonicalRequest(
  method: string,
  path: string,
  timestamp: string,
  nonce: string,
  body: Uint8Array | string,
): string {
  return `${method.toUpperCase()}\n${path}\n${timestamp}\n${nonce}\n${sha256Hex(body)}`;
}

export function requestSignature(apiSecret: string, canonical: string): string {
  return createHmac('sha256', Buffer.from(apiSecret, 'utf8')).update(canonical, 'utf8').digest('hex');
}

/** docs/protocol.md 4: kw1 \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n hex(sha256(body)). */
export function responseMessage(
  kid: string,
  method: string,
  path: string,
  status: number,
  timestamp: string,
  nonce: string,
  body: Uint8Array | string,
): string {
  return `kw1\n${kid}\n${method.toUpperCase()}\n${path}\n${status}\n${timestamp}\n${nonce}\n${sha256Hex(body)}`;
}

export function ed25519PublicKey(base64: string): KeyObject {
  const raw = Buffer.from(base64, 'base64');
  if (raw.length !== 32) throw new TypeError('an Ed25519 public key is 32 bytes');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** Strict base64 of exactly 64 bytes, else undefined (Buffer.from would silently skip junk). */
export function decodeSignature(value: string): Buffer | undefined {
  if (!/^[A-Za-z0-9+/]{86}==$/.test(value)) return undefined;
  const b = Buffer.from(value, 'base64');
  return b.length === 64 ? b : undefined;
}

export function ed25519Verify(key: KeyObject, message: string, signature: Uint8Array): boolean {
  return ed25519VerifyBytes(key, Buffer.from(message, 'utf8'), signature);
}

export function ed25519VerifyBytes(key: KeyObject, message: Uint8Array, signature: Uint8Array): boolean {
  try {
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

/** docs/protocol.md 6, heartbeat/start. */
export function startProof(session: string, systemId: string, token: string): string {
  return createHmac('sha256', Buffer.from(session, 'utf8'))
    .update(`kwhs1\n${systemId}\n${token}`, 'utf8')
    .digest('base64');
}

/** docs/protocol.md 6, heartbeat. */
export function beatProof(
  previousToken: string,
  session: string,
  beatIndex: number,
  newToken: string,
  beatCount: number,
): string {
  return createHmac('sha256', Buffer.from(previousToken, 'utf8'))
    .update(`kwhb1\n${session}\n${beatIndex}\n${newToken}\n${beatCount}`, 'utf8')
    .digest('base64');
}

/** Constant-time comparison of two base64 proofs. */
export function proofEquals(given: unknown, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** docs/protocol.md 5: returns the plaintext bytes; throws on a wrong key or damaged ciphertext. */
export function decryptResponse(ciphertextB64: string, encKey: string, apiSecret: string, initIv: string): Buffer {
  const key = createHash('sha256').update(`${encKey}-${apiSecret}`, 'utf8').digest();
  const iv = createHash('sha256').update(initIv, 'utf8').digest().subarray(0, 16);
  const d = createDecipheriv('aes-256-cbc', key, iv);
  return Buffer.concat([d.update(Buffer.from(ciphertextB64, 'base64')), d.final()]);
}

// ---- the realtime channel (docs/protocol.md "Realtime channel", sdk/vectors/channel.json) -------

/** "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval */
export function channelTranscript(h: {
  kid: string;
  ts: number;
  session: string;
  clientKey: string;
  serverKey: string;
  conn: string;
  beatInterval: number;
}): string {
  return ['kwc1-hello', h.kid, h.ts, h.session, h.clientKey, h.serverKey, h.conn, h.beatInterval].join('\n');
}

/** The two MAC keys: HKDF-SHA256(X25519(own secret, peer key), salt = sha256(transcript), "kwc1 keys", 64). */
export function channelKeys(
  privateKey: KeyObject,
  serverKey: string,
  transcript: string,
): { s2c: Buffer; c2s: Buffer } {
  if (!/^[A-Za-z0-9_-]{43}$/.test(serverKey)) throw new TypeError('server_key is not base64url of 32 bytes');
  const peer = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: serverKey }, format: 'jwk' });
  const shared = diffieHellman({ privateKey, publicKey: peer }); // throws for a low-order key (all-zero secret)
  const okm = Buffer.from(
    hkdfSync('sha256', shared, createHash('sha256').update(transcript, 'utf8').digest(), Buffer.from('kwc1 keys'), 64),
  );
  return { s2c: okm.subarray(0, 32), c2s: okm.subarray(32, 64) };
}

/** HMAC-SHA256(key, payload) || payload. */
export function sealFrame(key: Uint8Array, payload: Uint8Array): Buffer {
  return Buffer.concat([createHmac('sha256', key).update(payload).digest(), payload]);
}

/** The payload when the MAC verifies (constant time), else undefined. */
export function openFrame(key: Uint8Array, frame: Uint8Array): Buffer | undefined {
  if (frame.length <= 32) return undefined;
  const payload = Buffer.from(frame.subarray(32));
  const mac = createHmac('sha256', key).update(payload).digest();
  return timingSafeEqual(mac, frame.subarray(0, 32)) ? payload : undefined;
}
