// sdk/vectors/airgap.json must be exactly what scripts/gen-airgap-vectors.ts writes, and every pool and
// answer must be accepted or refused for the reason it names by a judge written here from the format
// (node:crypto only), so the flags are not just echoed from the generator.
import fs from 'node:fs';
import path from 'node:path';
import { createPublicKey, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AIRGAP_FILE, buildAirgapVectors } from '../../scripts/gen-airgap-vectors.js';
import { VECTORS_DIR } from '../../scripts/gen-offline-vectors.js';

const committed = fs.readFileSync(path.join(VECTORS_DIR, AIRGAP_FILE), 'utf8');
const v = JSON.parse(committed);
const keys = new Map<string, string>(
  v.pinned_keys.map((k: { kid: string; public_key: string }) => [k.kid, k.public_key]),
);
const time = (x: unknown) =>
  typeof x === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(x) ? Date.parse(x) : NaN;

/** The signed text, signature and payload of TAG.P.S, or a reason. */
function open(text: string, tag: string): { signed: string; sig: Buffer; p: Record<string, unknown> } | string {
  const parts = text.trim().split('.');
  if (parts.length !== 3 || parts[0] !== tag || !parts.slice(1).every((x) => /^[A-Za-z0-9_-]+$/.test(x)))
    return 'malformed';
  const sig = Buffer.from(parts[2]!, 'base64url');
  if (sig.length !== 64) return 'malformed';
  try {
    const p = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
    return p && typeof p === 'object' && !Array.isArray(p) ? { signed: `${tag}.${parts[1]}`, sig, p } : 'malformed';
  } catch {
    return 'malformed';
  }
}
function signedBy(kid: unknown, signed: string, sig: Buffer): string | undefined {
  const pub = keys.get(kid as string);
  if (!pub) return 'unknown_kid';
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pub, 'base64').toString('base64url') },
    format: 'jwk',
  });
  return verify(null, Buffer.from(signed, 'ascii'), key, sig) ? undefined : 'bad_signature';
}

function judgePool(c: { pool: string; now: number; app_id: string }): string {
  const o = open(c.pool, 'kwpool1');
  if (typeof o === 'string') return o;
  const { p } = o;
  const str = (x: unknown) => typeof x === 'string' && x !== '';
  const ok =
    p.v === 1 &&
    ['kid', 'app_id', 'license_id', 'relay_id'].every((k) => str(p[k])) &&
    Number.isInteger(p.seats) &&
    (p.seats as number) >= 1 &&
    Number.isInteger(p.level) &&
    Array.isArray(p.entitlements) &&
    p.entitlements.every((e) => typeof e === 'string') &&
    'expires_at' in p &&
    (p.expires_at === null || !Number.isNaN(time(p.expires_at))) &&
    !Number.isNaN(time(p.issued_at)) &&
    !Number.isNaN(time(p.valid_until));
  if (!ok) return 'malformed';
  const bad = signedBy(p.kid, o.signed, o.sig);
  if (bad) return bad;
  if (p.app_id !== c.app_id) return 'wrong_app';
  return c.now * 1000 >= time(p.valid_until) ? 'expired' : 'ok';
}

/** The answer cases fail the 12.5 checks they name (already judged by offline-vectors.test.ts) or the nonce. */
function judgeAnswer(c: { file: string; now: number; app_id: string; hwid: string; nonce: string | null }): string {
  const o = open(c.file, 'kwlic1');
  if (typeof o === 'string') return o;
  const bad = signedBy(o.p.kid, o.signed, o.sig);
  if (bad) return bad;
  if (o.p.app_id !== c.app_id) return 'wrong_app';
  if (o.p.hwid !== c.hwid.toLowerCase()) return 'wrong_hwid';
  if (c.now * 1000 >= time(o.p.valid_until)) return 'expired';
  return c.nonce !== null && o.p.request_nonce === c.nonce ? 'ok' : 'wrong_request';
}

describe('sdk/vectors/airgap.json', () => {
  it('is up to date (npx tsx scripts/gen-airgap-vectors.ts)', () => {
    expect(committed).toBe(buildAirgapVectors());
  });

  it('requests: kwreq1. and base64url of the JSON of the case, with a 16-byte nonce', () => {
    for (const c of v.requests.cases) {
      expect(c.request.startsWith('kwreq1.'), c.name).toBe(true);
      const body = JSON.parse(Buffer.from(c.request.slice(7), 'base64url').toString('utf8'));
      const { name: _, request: __, ...fields } = c;
      expect(body, c.name).toEqual(fields);
      expect(Buffer.from(c.nonce, 'base64url').length).toBe(16);
    }
  });

  it('every answer and pool is accepted or refused for the reason it names, and every reason occurs', () => {
    for (const [cases, judge, reasons] of [
      [v.responses.cases, judgeAnswer, v.responses.reasons],
      [v.pools.cases, judgePool, v.pools.reasons],
    ] as const) {
      const seen = new Set<string>();
      for (const c of cases) {
        expect((judge as (x: unknown) => string)(c), c.name).toBe(c.valid ? 'ok' : c.reason);
        if (!c.valid) seen.add(c.reason);
      }
      expect([...seen].sort()).toEqual([...reasons].sort());
    }
  });
});
