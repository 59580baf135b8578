// sdk/vectors/offline.json must be exactly what scripts/gen-offline-vectors.ts writes, and every case
// must be accepted or refused for the reason it names by an independent judge written here from
// docs/protocol.md 12.5 with node:crypto, so the flags are not just echoed from the generator.
import fs from 'node:fs';
import path from 'node:path';
import { createPublicKey, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildOfflineVectors, OFFLINE_FILE, VECTORS_DIR } from '../../scripts/gen-offline-vectors.js';

const committed = fs.readFileSync(path.join(VECTORS_DIR, OFFLINE_FILE), 'utf8');
const v = JSON.parse(committed);

const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;
/** Unix ms of a strict ISO 8601 UTC time, else undefined. */
function isoMs(x: unknown): number | undefined {
  const m = typeof x === 'string' ? ISO.exec(x) : null;
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s) + Math.floor(Number(`0.${m[7] ?? '0'}`) * 1000 + 1e-6);
  const back = new Date(ms);
  // Date.UTC rolls month 13 or day 31 of April over: such a date is not a date.
  return back.getUTCMonth() === mo - 1 && back.getUTCDate() === d && h < 24 && mi < 60 && s < 60 ? ms : undefined;
}

type Case = {
  name: string;
  file: string;
  now: number;
  last_seen: number | null;
  app_id: string;
  hwid: string;
  valid: boolean;
  reason?: string;
  payload?: unknown;
};

function judge(c: Case): string {
  const pinned = new Map<string, string>(
    v.pinned_keys.map((k: { kid: string; public_key: string }) => [k.kid, k.public_key]),
  );
  const parts = c.file.trim().split('.');
  if (parts.length !== 3 || parts[0] !== 'kwlic1' || !parts.slice(1).every((p) => /^[A-Za-z0-9_-]+$/.test(p)))
    return 'malformed';
  const [, head, sigText] = parts as [string, string, string];
  const sig = Buffer.from(sigText, 'base64url');
  if (head.length % 4 === 1 || sig.length !== 64) return 'malformed';
  let p: Record<string, unknown>;
  try {
    p = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(head, 'base64url')));
  } catch {
    return 'malformed';
  }
  const str = (x: unknown) => typeof x === 'string' && x !== '';
  if (
    p === null ||
    typeof p !== 'object' ||
    Array.isArray(p) ||
    p.v !== 1 ||
    !str(p.kid) ||
    !str(p.app_id) ||
    !str(p.license_id) ||
    !(p.user === null || typeof p.user === 'string') ||
    !str(p.hwid) ||
    !Number.isInteger(p.level) ||
    !Array.isArray(p.entitlements) ||
    !p.entitlements.every((e) => typeof e === 'string') ||
    !(p.expires_at === null || isoMs(p.expires_at) !== undefined) ||
    isoMs(p.issued_at) === undefined ||
    isoMs(p.valid_until) === undefined
  ) {
    return 'malformed';
  }
  const pub = pinned.get(p.kid as string);
  if (!pub) return 'unknown_kid';
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pub, 'base64').toString('base64url') },
    format: 'jwk',
  });
  if (!verify(null, Buffer.from(`kwlic1.${head}`, 'ascii'), key, sig)) return 'bad_signature';
  if (p.app_id !== c.app_id) return 'wrong_app';
  if (p.hwid !== c.hwid.toLowerCase()) return 'wrong_hwid';
  const now = c.now * 1000;
  if (c.last_seen !== null && now < (c.last_seen - v.max_rollback_seconds) * 1000) return 'clock_rolled_back';
  if (isoMs(p.issued_at)! > now + v.max_future_seconds * 1000) return 'issued_in_future';
  if (now >= isoMs(p.valid_until)!) return 'expired';
  expect(p, c.name).toEqual(c.payload);
  return 'ok';
}

describe('sdk/vectors/offline.json', () => {
  it('is up to date (npx tsx scripts/gen-offline-vectors.ts)', () => {
    expect(committed).toBe(buildOfflineVectors());
  });

  it('pins the same k1 as response-signatures.json (one signing key signs answers and files)', () => {
    const responses = JSON.parse(fs.readFileSync(path.join(VECTORS_DIR, 'response-signatures.json'), 'utf8'));
    expect(v.pinned_keys[0]).toEqual(responses.pinned_keys[0]);
  });

  it('every file is accepted or refused for the reason it names, and every reason occurs', () => {
    const seen = new Set<string>();
    for (const c of v.cases as Case[]) {
      expect(judge(c), c.name).toBe(c.valid ? 'ok' : c.reason);
      if (!c.valid) seen.add(c.reason!);
    }
    expect([...seen].sort()).toEqual([...v.reasons].sort());
  });

  it('grace_until cases: what each value grants and whether it is still running', () => {
    for (const c of v.grace.cases) {
      const ms = isoMs(c.grace_until);
      expect(ms === undefined ? null : ms, c.name).toBe(c.until === null ? null : Math.round(c.until * 1000));
      expect(ms !== undefined && c.now * 1000 < ms, c.name).toBe(c.active);
    }
  });
});
