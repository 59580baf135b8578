// Short-lived download links (docs/releases.md "Downloads"): `<base>/api/dl/<token>`, where the token
// names one artifact, one license (and the end user a login session holds it through) and an expiry,
// MACed with a key derived from the deployment's session-token key, so every host honours the links
// of every other and nothing is stored per link. A link is only a pass to ask: whether the key may
// still download (not banned or deleted, not expired under `expired_updates`, the release not yanked)
// is decided again at each GET.
import { constantTimeEqual, hmacSha256 } from '../../platform/crypto/index.js';

export const LINK_TTL_MS = 10 * 60 * 1000;

interface LinkClaims {
  artifactId: string;
  licenseId: string;
  userId: string | null;
  /** Unix ms. */
  expiresAt: number;
}

export class DownloadLinks {
  constructor(private readonly key: Buffer) {}

  issue(c: LinkClaims): string {
    const payload = Buffer.from(`${c.artifactId}.${c.licenseId}.${c.userId ?? '-'}.${c.expiresAt}`).toString(
      'base64url',
    );
    return `${payload}.${this.mac(payload)}`;
  }

  /** The link's claims when its MAC verifies and it has not expired; null otherwise. */
  open(token: string, now: number): LinkClaims | null {
    const dot = token.indexOf('.');
    if (dot <= 0 || token.length > 512) return null;
    const payload = token.slice(0, dot);
    if (!constantTimeEqual(this.mac(payload), token.slice(dot + 1))) return null;
    const [artifactId, licenseId, userId, expires] = Buffer.from(payload, 'base64url').toString('utf8').split('.');
    const expiresAt = Number(expires);
    if (!artifactId || !licenseId || !userId || !Number.isSafeInteger(expiresAt) || expiresAt <= now) return null;
    return { artifactId, licenseId, userId: userId === '-' ? null : userId, expiresAt };
  }

  private mac(payload: string): string {
    return hmacSha256(this.key, `kwdl1.${payload}`).toString('base64url');
  }
}
