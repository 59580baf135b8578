// Seat pools (docs/air-gapped.md "Seat pools"): what the service signs and what `keywarden relay` and the
// SDKs verify. A pool is the offline license file's shape with another prefix:
//   POOL = "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519-sign("kwpool1." base64url(PAYLOAD)))
// signed with the response-signing key its `kid` names, so whoever pins GET /api/client/keys can
// check it. This file imports only platform/crypto: the relay loads it without the server.
import { ed25519Sign, ed25519Verify } from '../../platform/crypto/index.js';

const PREFIX = 'kwpool1.';

export interface PoolPayload {
  v: 1;
  kid: string;
  app_id: string;
  license_id: string;
  relay_id: string;
  seats: number;
  level: number;
  entitlements: string[];
  expires_at: string | null;
  valid_until: string;
  issued_at: string;
}

/** Field order is the payload's documented order; times are ISO-8601 UTC. */
export function signPool(kid: string, secretKey: Uint8Array, p: Omit<PoolPayload, 'v' | 'kid'>): string {
  const payload: PoolPayload = {
    v: 1,
    kid,
    app_id: p.app_id,
    license_id: p.license_id,
    relay_id: p.relay_id,
    seats: p.seats,
    level: p.level,
    entitlements: [...p.entitlements].sort(),
    expires_at: p.expires_at,
    valid_until: p.valid_until,
    issued_at: p.issued_at,
  };
  const head = `${PREFIX}${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`;
  return `${head}.${ed25519Sign(Buffer.from(head, 'ascii'), secretKey).toString('base64url')}`;
}

const B64URL = /^[A-Za-z0-9_-]+$/;

/** The payload of a pool whose signature verifies under `publicKey`; a reason when it does not. */
export function verifyPool(pool: string, publicKey: Uint8Array): { ok: true; payload: PoolPayload } | { ok: false } {
  const text = pool.trim();
  if (!text.startsWith(PREFIX)) return { ok: false };
  const parts = text.slice(PREFIX.length).split('.');
  if (parts.length !== 2 || !parts.every((s) => B64URL.test(s))) return { ok: false };
  const head = `${PREFIX}${parts[0]}`;
  if (!ed25519Verify(Buffer.from(parts[1]!, 'base64url'), Buffer.from(head, 'ascii'), publicKey)) return { ok: false };
  try {
    const payload = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8')) as PoolPayload;
    const fine =
      payload.v === 1 &&
      typeof payload.relay_id === 'string' &&
      typeof payload.license_id === 'string' &&
      Number.isInteger(payload.seats) &&
      payload.seats > 0 &&
      !Number.isNaN(Date.parse(payload.valid_until));
    return fine ? { ok: true, payload } : { ok: false };
  } catch {
    return { ok: false };
  }
}
