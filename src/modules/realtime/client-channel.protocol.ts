// The realtime client channel's wire format (docs/protocol.md "Realtime channel"), pure and in one
// place: the server (client-channel.ts) and scripts/gen-vectors.ts (sdk/vectors/channel.json) both
// use it.
//
// Handshake. The client upgrades `GET /api/client/ws` sending X-Session and, as its X-Nonce,
// base64url(its fresh X25519 public key); with require_signature the upgrade is signed like any call
// (docs/protocol.md 3, empty body), so the signature and the nonce ledger cover that key. The server's first
// message is `hello` (a text frame) signed with the response-signing key (docs/protocol.md 4's kid) over a
// transcript that binds the session, the client's key, the server's ephemeral key and this
// connection's id. Both sides derive one HMAC key per direction from X25519 and HKDF-SHA256 salted
// with the transcript's hash.
// Frames. Every later message, both ways, is a binary frame `HMAC-SHA256(key, payload) || payload`,
// the payload a JSON object whose `seq` counts 1, 2, 3 ... per direction. A frame recorded on another
// connection fails its MAC (other keys); a dropped, repeated or reordered one fails its `seq`.
import {
  constantTimeEqual,
  ed25519Sign,
  hkdfSha256Salted,
  hmacSha256Into,
  sha256,
  x25519,
  x25519PublicKey,
} from '../../platform/crypto/index.js';
import type { RevokeReason } from './client-push.service.js';

export const CHANNEL_PATH = '/api/client/ws';
const CHANNEL_VERSION = 1;
const HELLO_LABEL = 'kwc1-hello';
const KEYS_INFO = 'kwc1 keys';
const MAC_BYTES = 32;
/** base64url (no padding) of 32 bytes: an X25519 public key, which is also the upgrade's X-Nonce. */
export const KEY_FORMAT = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
/** The calls a client may make on the channel: the REST heartbeat endpoints, same bodies minus `session`. */
const CHANNEL_OPS = ['heartbeat/start', 'heartbeat', 'heartbeat/stop'] as const;
export type ChannelOp = (typeof CHANNEL_OPS)[number];

/** WebSocket close codes the server uses. */
export const CLOSE = {
  normal: 1000, // after heartbeat/stop on the channel
  goingAway: 1001, // the worker shuts down: reconnect (to any worker)
  protocol: 1008, // bad MAC, seq out of order, malformed or unknown message, too many calls in flight
  serverError: 1011,
  superseded: 4001, // another connection attached the same session
  revoked: 4003, // after a `revoked` message
  idle: 4008, // no accepted beat for the heartbeat expiry window
} as const;

/** What each revocation tells the client (`detail` of the `revoked` message). */
export const REVOKE_DETAIL: Record<RevokeReason, string> = {
  license_banned: 'License key is banned',
  license_deleted: 'License key deleted',
  user_banned: 'User banned',
  user_deleted: 'User deleted',
  hwid_reset: 'HWID reset: authenticate again',
  app_disabled: 'Application disabled',
  app_deleted: 'Application deleted',
  blacklisted: 'Access denied',
  session_killed: 'Heartbeat session killed',
  expired: 'License expired',
};

interface HelloFields {
  kid: string;
  /** Unix seconds. */
  ts: number;
  session: string;
  /** base64url X25519 public key of the client (its X-Nonce). */
  clientKey: string;
  /** base64url X25519 public key of the server, fresh per connection. */
  serverKey: string;
  /** This connection's id (base64url). */
  conn: string;
  beatInterval: number;
}

/** The signed transcript: "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval. */
export function helloTranscript(h: HelloFields): string {
  return [HELLO_LABEL, h.kid, h.ts, h.session, h.clientKey, h.serverKey, h.conn, h.beatInterval].join('\n');
}

export interface ChannelKeys {
  /** Server-to-client MAC key. */
  s2c: Buffer;
  /** Client-to-server MAC key. */
  c2s: Buffer;
}

/**
 * okm = HKDF-SHA256(ikm = X25519 secret, salt = sha256(transcript), info = "kwc1 keys", 64);
 * s2c = okm[0..32], c2s = okm[32..64].
 */
export function deriveKeys(shared: Uint8Array, transcript: string): ChannelKeys {
  const okm = hkdfSha256Salted(shared, sha256(transcript), KEYS_INFO, 64);
  return { s2c: okm.subarray(0, 32), c2s: okm.subarray(32, 64) };
}

function decodeKey(b64url: string): Buffer | null {
  if (!KEY_FORMAT.test(b64url)) return null;
  const k = Buffer.from(b64url, 'base64url');
  return k.byteLength === 32 ? k : null;
}

export interface BuiltHello {
  /** The text frame to send first. */
  text: string;
  transcript: string;
  keys: ChannelKeys;
}

/**
 * The server's hello and the connection's keys; null when the client's key is not a usable X25519
 * key. `serverSecret` and `conn` are random per connection (fixed only by the test vectors).
 */
export function buildHello(
  signing: { kid: string; secretKey: Uint8Array },
  f: Omit<HelloFields, 'kid' | 'serverKey'>,
  serverSecret: Uint8Array,
): BuiltHello | null {
  const clientPublic = decodeKey(f.clientKey);
  if (!clientPublic) return null;
  const shared = x25519(serverSecret, clientPublic);
  if (!shared) return null;
  const fields: HelloFields = {
    ...f,
    kid: signing.kid,
    serverKey: x25519PublicKey(serverSecret).toString('base64url'),
  };
  const transcript = helloTranscript(fields);
  const sig = ed25519Sign(Buffer.from(transcript, 'utf8'), signing.secretKey).toString('base64');
  const text = JSON.stringify({
    type: 'hello',
    v: CHANNEL_VERSION,
    kid: fields.kid,
    ts: fields.ts,
    server_key: fields.serverKey,
    conn: fields.conn,
    beat_interval: fields.beatInterval,
    sig,
  });
  return { text, transcript, keys: deriveKeys(shared, transcript) };
}

/** MAC(32) || payload, in one buffer (a string payload is written as UTF-8 straight into it). */
export function sealFrame(key: Uint8Array, payload: string | Uint8Array): Buffer {
  const bytes = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength;
  const frame = Buffer.allocUnsafe(MAC_BYTES + bytes);
  if (typeof payload === 'string') frame.write(payload, MAC_BYTES, 'utf8');
  else frame.set(payload, MAC_BYTES);
  hmacSha256Into(frame, key, frame.subarray(MAC_BYTES));
  return frame;
}

const macScratch = Buffer.alloc(MAC_BYTES);

/**
 * The payload when the MAC verifies, else null: a view of `frame`, valid only as long as the frame
 * is (a uWS message buffer: until its handler returns).
 */
export function verifyFrame(key: Uint8Array, frame: Uint8Array): Buffer | null {
  if (frame.byteLength <= MAC_BYTES) return null;
  const payload = Buffer.from(frame.buffer, frame.byteOffset + MAC_BYTES, frame.byteLength - MAC_BYTES);
  hmacSha256Into(macScratch, key, payload);
  return constantTimeEqual(macScratch, frame.subarray(0, MAC_BYTES)) ? payload : null;
}

export type ClientMessage =
  { type: 'call'; seq: number; op: ChannelOp; body: Record<string, unknown> } | { type: 'ping'; seq: number };

/** A verified payload as a client message; a string says why it is refused (the close reason). */
export function parseClientMessage(payload: Buffer, expectedSeq: number): ClientMessage | string {
  let m: unknown;
  try {
    m = JSON.parse(payload.toString('utf8'));
  } catch {
    return 'malformed message';
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return 'malformed message';
  const o = m as Record<string, unknown>;
  if (o.seq !== expectedSeq) return 'message out of order';
  if (o.type === 'ping') return { type: 'ping', seq: expectedSeq };
  if (o.type !== 'call') return 'unknown message type';
  if (!(CHANNEL_OPS as readonly unknown[]).includes(o.op)) return 'unknown call';
  const body = o.body ?? {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'malformed message';
  return { type: 'call', seq: expectedSeq, op: o.op as ChannelOp, body: body as Record<string, unknown> };
}
