// Offline license files (docs/protocol.md 12.5) and the clock record that guards them.
//
// FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD))), signed by
// one of the response-signing keys this SDK pins. Accepted only when, in this order (shared by every
// SDK and fixed by sdk/vectors/offline.json):
//   1. it has that shape and PAYLOAD is the JSON object 12.5 describes   (else malformed)
//   2. its kid is pinned                                                 (unknown_kid)
//   3. the signature verifies                                            (bad_signature)
//   4. app_id is this application's                                     (wrong_app)
//   5. hwid is this machine's (compared lower-cased)                     (wrong_hwid)
//   6. the clock is not more than 300 s below the latest time seen       (clock_rolled_back)
//   7. issued_at is at most 300 s ahead of the clock                     (issued_in_future)
//   8. the clock is before valid_until                                   (expired)
// The latest time seen lives in a small JSON state file, {"v": 1, "last_seen": <unix seconds>}; every
// check records its clock reading there (never lowering it). Deleting the file forgets the record:
// like anything on an end user's machine it is a speed bump, which is why files carry a bounded
// valid_until.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { ed25519VerifyBytes } from './crypto.js';
import { offlineError } from './errors.js';
import { parseUtcMs } from './utc.js';
import type { PinnedKeys } from './verify.js';

export const MAX_FUTURE_SECONDS = 300;
export const MAX_ROLLBACK_SECONDS = 300;

/** A verified offline license file: what it grants and until when. */
export interface OfflineLicense {
  appId: string;
  licenseId: string;
  /** The username of a user license, null for a license-only key. */
  user: string | null;
  hwid: string;
  level: number;
  /** Sorted codes. */
  entitlements: string[];
  /** The key's own expiry, null for a lifetime key. */
  expiresAt: Date | null;
  issuedAt: Date;
  /** The file is accepted until this moment. */
  validUntil: Date;
  kid: string;
}

const B64URL = /^[A-Za-z0-9_-]+$/;
export const text = (v: unknown): v is string => typeof v === 'string' && v !== '';

export function b64url(part: string): Buffer | undefined {
  return B64URL.test(part) && part.length % 4 !== 1 ? Buffer.from(part, 'base64url') : undefined;
}

/**
 * (signed text, signature, payload object) of `<tag>.<payload>.<signature>`; throws `malformed`. Shared by
 * license files (kwlic1) and seat pools (kwpool1).
 */
export function openSigned(file: unknown, tag: string): { signed: string; sig: Buffer; p: Record<string, unknown> } {
  if (typeof file !== 'string') throw offlineError('malformed', `a ${tag} text is a string`);
  const parts = file.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '').split('.');
  if (parts.length !== 3 || parts[0] !== tag) throw offlineError('malformed', `not "${tag}.<payload>.<signature>"`);
  const raw = b64url(parts[1]!);
  const sig = b64url(parts[2]!);
  if (!raw || !sig || sig.length !== 64)
    throw offlineError('malformed', 'payload or signature is not base64url (a signature is 64 bytes)');
  let p: unknown;
  try {
    p = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch {
    throw offlineError('malformed', 'payload is not UTF-8 JSON');
  }
  if (p === null || typeof p !== 'object' || Array.isArray(p))
    throw offlineError('malformed', 'payload is not an object');
  return { signed: `${tag}.${parts[1]}`, sig, p: p as Record<string, unknown> };
}

/** What files and pools both grant: v 1, an integer level, entitlement codes, the times. */
export function grantFieldsOk(o: Record<string, unknown>): boolean {
  return (
    o.v === 1 &&
    Number.isInteger(o.level) &&
    Array.isArray(o.entitlements) &&
    o.entitlements.every((e) => typeof e === 'string') &&
    'expires_at' in o &&
    (o.expires_at === null || parseUtcMs(o.expires_at) !== undefined) &&
    parseUtcMs(o.issued_at) !== undefined &&
    parseUtcMs(o.valid_until) !== undefined
  );
}

/** (signed text, signature, payload) of a well-formed file; throws `malformed`. */
function parse(file: unknown): { signed: string; sig: Buffer; p: Record<string, unknown> } {
  const opened = openSigned(file, 'kwlic1');
  const o = opened.p;
  const good =
    grantFieldsOk(o) &&
    text(o.kid) &&
    text(o.app_id) &&
    text(o.license_id) &&
    text(o.hwid) &&
    (o.user === null || typeof o.user === 'string');
  if (!good)
    throw offlineError('malformed', 'payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type');
  return opened;
}

/**
 * Checks `file` as the comment at the top says; `nowMs` is the clock, `lastSeenMs` the state file's
 * record (undefined: none). Throws `offline_invalid` with an OfflineReason.
 */
export function verifyLicenseFile(
  file: string,
  keys: PinnedKeys,
  appId: string,
  hwid: string,
  nowMs: number,
  lastSeenMs: number | undefined,
): OfflineLicense {
  const { signed, sig, p } = parse(file);
  const key = keys.get(p.kid as string);
  if (!key) throw offlineError('unknown_kid', `signed under key ${JSON.stringify(p.kid)}, which this SDK does not pin`);
  if (!ed25519VerifyBytes(key, Buffer.from(signed, 'ascii'), sig))
    throw offlineError('bad_signature', 'the signature does not verify');
  if (p.app_id !== appId) throw offlineError('wrong_app', `issued for application ${JSON.stringify(p.app_id)}`);
  if (p.hwid !== hwid.toLowerCase()) throw offlineError('wrong_hwid', 'issued for another machine');
  if (lastSeenMs !== undefined && nowMs < lastSeenMs - MAX_ROLLBACK_SECONDS * 1000) {
    throw offlineError(
      'clock_rolled_back',
      `the clock reads ${Math.round((lastSeenMs - nowMs) / 1000)} s before a time already seen`,
    );
  }
  const issued = parseUtcMs(p.issued_at)!;
  const until = parseUtcMs(p.valid_until)!;
  if (issued > nowMs + MAX_FUTURE_SECONDS * 1000)
    throw offlineError('issued_in_future', `issued ${Math.round((issued - nowMs) / 1000)} s ahead of the clock`);
  if (nowMs >= until) throw offlineError('expired', `valid until ${String(p.valid_until)}`);
  const expires = parseUtcMs(p.expires_at);
  return {
    appId: p.app_id as string,
    licenseId: p.license_id as string,
    user: (p.user as string | null) ?? null,
    hwid: p.hwid as string,
    level: p.level as number,
    entitlements: [...new Set(p.entitlements as string[])].sort(),
    expiresAt: expires === undefined ? null : new Date(expires),
    issuedAt: new Date(issued),
    validUntil: new Date(until),
    kid: p.kid as string,
  };
}

/**
 * Per user and application: <state dir>/keywarden/<first 16 hex of sha256(api_key)>.json, the state
 * dir being %LOCALAPPDATA% (Windows), ~/Library/Application Support (macOS), else $XDG_STATE_HOME or
 * ~/.local/state.
 */
export function defaultStateFile(
  apiKey: string,
  platform: NodeJS.Platform = process.platform,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const name = `${createHash('sha256').update(apiKey, 'utf8').digest('hex').slice(0, 16)}.json`;
  const home = os.homedir();
  if (platform === 'win32')
    return path.join(env.LOCALAPPDATA || path.join(home, 'AppData', 'Local'), 'Keywarden', name);
  if (platform === 'darwin') return path.join(home, 'Library', 'Application Support', 'Keywarden', name);
  return path.join(env.XDG_STATE_HOME || path.join(home, '.local', 'state'), 'keywarden', name);
}

type Log = (event: string, fields: Record<string, unknown>) => void;

/**
 * The latest clock reading seen, kept in a JSON file. An unreadable or damaged file counts as no
 * record; a file that cannot be written is logged and the check goes on (both are things the end
 * user can do anyway by deleting it).
 */
export class ClockRecord {
  constructor(
    readonly file: string,
    private readonly warn: Log,
  ) {}

  /** Unix ms, or undefined. */
  lastSeen(): number | undefined {
    let v: unknown;
    try {
      v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(fs.readFileSync(this.file)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.warn('keywarden.offline.state_unreadable', { file: this.file, error: String(err) });
      return undefined;
    }
    const seen = v !== null && typeof v === 'object' ? (v as Record<string, unknown>).last_seen : undefined;
    if (typeof seen !== 'number' || !Number.isFinite(seen)) {
      this.warn('keywarden.offline.state_unreadable', { file: this.file, error: 'no last_seen' });
      return undefined;
    }
    return seen * 1000;
  }

  /** last_seen = max(last_seen, now), written atomically (a temporary file, then a rename). */
  record(nowMs: number): void {
    const seen = this.lastSeen();
    if (seen !== undefined && seen >= nowMs) return;
    const tmp = path.join(path.dirname(this.file), `.kwstate-${randomBytes(6).toString('hex')}`);
    try {
      fs.mkdirSync(path.dirname(this.file), { recursive: true });
      fs.writeFileSync(tmp, JSON.stringify({ v: 1, last_seen: Math.floor(nowMs / 1000) }));
      fs.renameSync(tmp, this.file);
    } catch (err) {
      try {
        fs.rmSync(tmp, { force: true });
      } catch {
        // its directory could not be made: nothing was written
      }
      this.warn('keywarden.offline.state_unwritable', { file: this.file, error: String(err) });
    }
  }
}
