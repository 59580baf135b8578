// Offline license files (docs/protocol.md 12.5):
//   FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519-sign("kwlic1." base64url(PAYLOAD)))
// signed with the active response-signing key, whose kid the payload names (GET /api/client/keys
// publishes it), so an SDK verifies a file with the keys it already pins. The payload's field order
// and formats are those of sdk/vectors/offline.json: ISO-8601 UTC times, `user` and `expires_at`
// null when there is none, never absent.
import { ed25519Sign } from '../../platform/crypto/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';

interface OfflineGrant {
  appId: string;
  licenseId: string;
  user: string | null;
  hwid: string;
  level: number;
  entitlements: readonly string[];
  expiresAt: Date | null;
  offlineDays: number;
  /** The nonce of the SDK's activation request this file answers (docs/protocol.md 18.1), last in the payload. */
  requestNonce?: string;
}

const DAY_MS = 86_400_000;

export function offlineFile(key: ResponseSigningKey, g: OfflineGrant, now: number): string {
  const limit = now + g.offlineDays * DAY_MS;
  const validUntil = g.expiresAt && g.expiresAt.getTime() < limit ? g.expiresAt.getTime() : limit;
  const payload = {
    v: 1,
    kid: key.kid,
    app_id: g.appId,
    license_id: g.licenseId,
    user: g.user,
    hwid: g.hwid,
    level: g.level,
    entitlements: [...g.entitlements].sort(),
    expires_at: g.expiresAt?.toISOString() ?? null,
    issued_at: new Date(now).toISOString(),
    valid_until: new Date(validUntil).toISOString(),
    ...(g.requestNonce === undefined ? {} : { request_nonce: g.requestNonce }),
  };
  const head = `kwlic1.${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`;
  return `${head}.${ed25519Sign(Buffer.from(head, 'ascii'), key.secretKey).toString('base64url')}`;
}
