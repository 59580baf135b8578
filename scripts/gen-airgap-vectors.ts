// Writes sdk/vectors/airgap.json: the air-gapped formats of docs/air-gapped.md that every SDK checks
// offline: activation requests (kwreq1) it must write, nonce-bound answers (kwlic1 with request_nonce)
// it must accept or refuse for one named reason, and seat pools (kwpool1) a relay hands out. Built with
// node:crypto alone and the test-only keys of gen-offline-vectors.ts, so k1 here is k1 there; every input
// is fixed, so the output is byte-for-byte the same on every run (test/sdk/airgap-vectors.test.ts checks).
//
//   npx tsx scripts/gen-airgap-vectors.ts     write sdk/vectors/airgap.json
import fs from 'node:fs';
import path from 'node:path';
import { createHash, sign } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { keyOf, licenseFile, VECTORS_DIR, type Key } from './gen-offline-vectors.js';

export const AIRGAP_FILE = 'airgap.json';

const b64url = (b: Uint8Array | string) => Buffer.from(b).toString('base64url');
const iso = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();
const NOW = 1767225600; // 2026-01-01T00:00:00Z
const DAY = 86_400;
const APP_ID = '6f1c2a9e-4b7d-4c1a-9e55-0a1b2c3d4e5f';
const HWID = createHash('sha256').update('offline-vector-machine', 'utf8').digest('hex');
const nonceOf = (label: string) => b64url(createHash('sha256').update(`kwreq-nonce:${label}`).digest().subarray(0, 16));

/** REQ = "kwreq1." base64url(UTF-8 JSON). */
const request = (body: Record<string, unknown>) => `kwreq1.${b64url(JSON.stringify(body))}`;

function requestCases() {
  const base = {
    v: 1,
    app_id: APP_ID,
    key: 'KW-ABCD-EFGH-JKLM',
    hwid: HWID,
    nonce: nonceOf('a'),
    created_at: iso(NOW),
  };
  const withComponents = {
    ...base,
    nonce: nonceOf('b'),
    components: { cpu: 'c1', disk: 'd1', board: 'b1' },
  };
  const unicode = { ...base, key: 'clé-ÅÄÖ-鍵', nonce: nonceOf('c') };
  return [
    { name: 'a license key', body: base },
    { name: 'with machine components', body: withComponents },
    { name: 'a key outside ASCII (UTF-8 JSON)', body: unicode },
  ].map(({ name, body }) => ({ name, ...body, request: request(body) }));
}

function responseCases(k1: Key, k9: Key) {
  const issued = NOW - 3600;
  const nonce = nonceOf('a');
  const base = {
    v: 1,
    kid: 'k1',
    app_id: APP_ID,
    license_id: '0d9b6c3e-1f2a-4e5b-8c7d-9e0f1a2b3c4d',
    user: null,
    hwid: HWID,
    level: 3,
    entitlements: ['pro'],
    expires_at: iso(NOW + 60 * DAY),
    issued_at: iso(issued),
    valid_until: iso(issued + DAY),
    request_nonce: nonce,
  };
  type Payload = Record<string, unknown>;
  const file = (p: Payload, key: Key = k1) => licenseFile(key, JSON.stringify(p));
  const at = { now: NOW, last_seen: null as number | null, app_id: APP_ID, hwid: HWID, nonce: nonce as string | null };
  type Over = Partial<typeof at>;
  const ok = (name: string, p: Payload, o: Over = {}) => ({
    name,
    file: file(p),
    ...at,
    ...o,
    valid: true,
    payload: p,
  });
  const no = (name: string, f: string, reason: string, o: Over = {}) => ({
    name,
    file: f,
    ...at,
    ...o,
    valid: false,
    reason,
  });
  const { request_nonce: _, ...plain } = base;
  return [
    ok("the answer to this machine's latest request", base),
    ok('surrounding whitespace is ignored', base, {}),
    no('the answer to an older request (another nonce)', file(base), 'wrong_request', { nonce: nonceOf('newer') }),
    no('no request kept on this machine', file(base), 'wrong_request', { nonce: null }),
    no('a plain offline file (no request_nonce) is no answer to a request', file(plain), 'wrong_request'),
    no('request_nonce not a string', file({ ...base, request_nonce: 7 }), 'wrong_request'),
    no(
      "another machine's answer: the machine is checked before the nonce",
      file({ ...base, hwid: 'f'.repeat(64) }),
      'wrong_hwid',
    ),
    no('another application', file({ ...base, app_id: 'another-app-0001' }), 'wrong_app'),
    no(
      'the nonce edited after signing',
      `kwlic1.${b64url(JSON.stringify({ ...base, request_nonce: nonceOf('x') }))}.${file(base).split('.')[2]}`,
      'bad_signature',
      { nonce: nonceOf('x') },
    ),
    no('signed by another key under kid k1', file(base, k9), 'bad_signature'),
    no('expired: the 12.5 checks come before the nonce', file(base), 'expired', { now: issued + 2 * DAY, nonce: 'x' }),
    no('not a license file', request({ v: 1 }), 'malformed'),
  ].map((c, i) => (i === 1 ? { ...c, file: `\n ${c.file}\r\n` } : c));
}

/** POOL = "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519-sign("kwpool1." base64url(PAYLOAD))). */
function pool(key: Key, payload: string): string {
  const head = `kwpool1.${b64url(payload)}`;
  return `${head}.${b64url(sign(null, Buffer.from(head, 'ascii'), key.privateKey))}`;
}

function poolCases(k1: Key, k2: Key, k9: Key) {
  const base = {
    v: 1,
    kid: 'k1',
    app_id: APP_ID,
    license_id: '0d9b6c3e-1f2a-4e5b-8c7d-9e0f1a2b3c4d',
    relay_id: 'relay-7f3a9c',
    seats: 50,
    level: 3,
    entitlements: ['export', 'pro'],
    expires_at: iso(NOW + 60 * DAY),
    valid_until: iso(NOW + 30 * DAY),
    issued_at: iso(NOW - DAY),
  };
  type Payload = Record<string, unknown>;
  const make = (p: Payload, key: Key = k1) => pool(key, JSON.stringify(p));
  const at = { now: NOW, app_id: APP_ID };
  const ok = (name: string, p: Payload, key: Key = k1) => ({
    name,
    pool: make(p, key),
    ...at,
    valid: true,
    payload: p,
  });
  const no = (name: string, text: string, reason: string, now = NOW) => ({
    name,
    pool: text,
    ...at,
    now,
    valid: false,
    reason,
  });
  const [, head, sig] = make(base).split('.') as [string, string, string];
  const omit = (k: string) => Object.fromEntries(Object.entries(base).filter(([n]) => n !== k));
  return [
    ok('a pool of 50 seats', base),
    ok(
      'a lifetime key without entitlements, signed by the second pinned key',
      {
        ...base,
        kid: 'k2',
        expires_at: null,
        entitlements: [],
      },
      k2,
    ),
    no('signed by another key under kid k1 (a forged pool)', make(base, k9), 'bad_signature'),
    no(
      'seats raised after signing (50 -> 5000)',
      `kwpool1.${b64url(JSON.stringify({ ...base, seats: 5000 }))}.${sig}`,
      'bad_signature',
    ),
    no(
      'a kwlic1 signature does not sign a pool',
      `kwpool1.${head}.${b64url(sign(null, Buffer.from(`kwlic1.${head}`, 'ascii'), k1.privateKey))}`,
      'bad_signature',
    ),
    no('kid not pinned', make({ ...base, kid: 'k9' }, k9), 'unknown_kid'),
    no('another application', make({ ...base, app_id: 'another-app-0001' }), 'wrong_app'),
    no('now exactly valid_until', make(base), 'expired', NOW + 30 * DAY),
    no('a kwlic1 file', licenseFile(k1, JSON.stringify(base)), 'malformed'),
    no('two parts', `kwpool1.${head}`, 'malformed'),
    no('seats 0', make({ ...base, seats: 0 }), 'malformed'),
    no('seats a string', make({ ...base, seats: '50' }), 'malformed'),
    no('relay_id missing', make(omit('relay_id')), 'malformed'),
    no('expires_at missing (null when there is none)', make(omit('expires_at')), 'malformed'),
    no('valid_until not a time', make({ ...base, valid_until: 'soon' }), 'malformed'),
    no('format version 2', make({ ...base, v: 2 }), 'malformed'),
  ];
}

export function buildAirgapVectors(): string {
  const k1 = keyOf('k1', 'k1');
  const k2 = keyOf('k2', 'k2');
  const k9 = keyOf('k9', 'k9-not-pinned');
  const v = {
    description:
      'Air-gapped machines (the server\'s docs/air-gapped.md; see sdk/vectors/README.md "airgap.json"). ' +
      'Keys and nonces are test-only values derived from labels.',
    pinned_keys: [k1, k2].map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: k.publicKey })),
    requests: { cases: requestCases() },
    responses: {
      reasons: ['malformed', 'bad_signature', 'wrong_app', 'wrong_hwid', 'expired', 'wrong_request'],
      cases: responseCases(k1, k9),
    },
    pools: {
      reasons: ['malformed', 'unknown_kid', 'bad_signature', 'wrong_app', 'expired'],
      cases: poolCases(k1, k2, k9),
    },
  };
  return JSON.stringify(v, null, 2) + '\n';
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  fs.writeFileSync(path.join(VECTORS_DIR, AIRGAP_FILE), buildAirgapVectors());
  console.log(`wrote sdk/vectors/${AIRGAP_FILE}`);
}
