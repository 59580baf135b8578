// Writes sdk/vectors/offline.json: offline license files (docs/protocol.md 12.5) that every SDK must accept
// or refuse for one named reason, and grace_until values (12.6) and what they grant. Built with
// node:crypto alone, not with the server's code: the server side of the licensing models comes
// later, and the files here are what it will have to produce. Ed25519 signatures are deterministic
// and every input is fixed, so the output is byte-for-byte the same on every run;
// test/unit/sdk-offline-vectors.test.ts rebuilds it in memory and fails when the committed file differs.
//
//   npx tsx scripts/gen-offline-vectors.ts     write sdk/vectors/offline.json
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createHash, createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto';

export const VECTORS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../sdk/vectors');
export const OFFLINE_FILE = 'offline.json';

/** The same test-only seeds as scripts/gen-vectors.ts (k1 here is k1 there). Never use them for real. */
const seedOf = (label: string) => createHash('sha256').update(`keywarden-test-vector-seed:${label}`, 'utf8').digest();
// RFC 8410 PKCS#8 prefix of an Ed25519 private key; the 32-byte seed follows.
const ED25519_PKCS8 = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface Key { kid: string; privateKey: KeyObject; publicKey: string }
export function keyOf(kid: string, label: string): Key {
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8, seedOf(label)]), format: 'der', type: 'pkcs8' });
  const x = createPublicKey(privateKey).export({ format: 'jwk' }).x!;
  return { kid, privateKey, publicKey: Buffer.from(x, 'base64url').toString('base64') };
}

const b64url = (b: Uint8Array | string) => Buffer.from(b).toString('base64url');
const iso = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();

/** FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519-sign("kwlic1." base64url(PAYLOAD))). */
export function licenseFile(key: Key, payload: Uint8Array | string): string {
  const head = `kwlic1.${b64url(payload)}`;
  return `${head}.${b64url(sign(null, Buffer.from(head, 'ascii'), key.privateKey))}`;
}

const NOW = 1767225600; // 2026-01-01T00:00:00Z
const DAY = 86_400;
const APP_ID = '6f1c2a9e-4b7d-4c1a-9e55-0a1b2c3d4e5f';
const HWID = createHash('sha256').update('offline-vector-machine', 'utf8').digest('hex');

function offlineCases() {
  const k1 = keyOf('k1', 'k1');
  const k2 = keyOf('k2', 'k2');
  const k9 = keyOf('k9', 'k9-not-pinned');
  const issued = NOW - 3600;
  const base = {
    v: 1, kid: 'k1', app_id: APP_ID, license_id: '0d9b6c3e-1f2a-4e5b-8c7d-9e0f1a2b3c4d', user: null as string | null, hwid: HWID,
    level: 3, entitlements: ['export', 'pro'], expires_at: iso(NOW + 60 * DAY) as string | null, issued_at: iso(issued),
    valid_until: iso(issued + 7 * DAY),
  };
  type Payload = Record<string, unknown>;
  const json = (p: Payload) => JSON.stringify(p);
  const file = (p: Payload, key: Key = k1) => licenseFile(key, json(p));
  const valid = file(base);
  const [, validPayload, validSig] = valid.split('.') as [string, string, string];
  const other = file({ ...base, license_id: 'another-license-0001' });
  const at = { now: NOW, last_seen: null as number | null, app_id: APP_ID, hwid: HWID };

  type Case = { name: string; file: string; valid: boolean; reason?: string; payload?: Payload } & Partial<typeof at>;
  const ok = (name: string, f: string, payload: Payload, o: Partial<typeof at> = {}): Case => ({ name, file: f, valid: true, payload, ...o });
  const no = (name: string, f: string, reason: string, o: Partial<typeof at> = {}): Case => ({ name, file: f, valid: false, reason, ...o });
  const lifetime = { ...base, user: 'alice', expires_at: null, entitlements: [] };
  const byK2 = { ...base, kid: 'k2' };
  const edge = { ...base, issued_at: iso(NOW + 300), valid_until: iso(NOW + 300 + 7 * DAY) };

  const cases: Case[] = [
    ok('valid', valid, base),
    ok('valid, last seen a day ago', valid, base, { last_seen: NOW - DAY }),
    ok('valid: a user license without expiry or entitlements', file(lifetime), lifetime),
    ok('valid: signed by the second pinned key', file(byK2, k2), byK2),
    ok('issued_at exactly 300 s ahead of the clock is accepted', file(edge), edge),
    ok('clock exactly 300 s below the latest time seen is accepted', valid, base, { last_seen: NOW + 300 }),
    ok('the HWID is compared lower-cased (servers store it so)', valid, base, { hwid: HWID.toUpperCase() }),
    ok('surrounding whitespace (a saved file ends with a newline) is ignored', `  ${valid}\n`, base),

    no('signed by another key under kid k1', file(base, k9), 'bad_signature'),
    no('payload changed after signing (level 3 -> 9)', `kwlic1.${b64url(json({ ...base, level: 9 }))}.${validSig}`, 'bad_signature'),
    no('signature of another file', `kwlic1.${validPayload}.${other.split('.')[2]}`, 'bad_signature'),
    no('signature over the payload without the kwlic1. prefix', `kwlic1.${validPayload}.${b64url(sign(null, Buffer.from(validPayload, 'ascii'), k1.privateKey))}`, 'bad_signature'),
    no('kid not pinned', file({ ...base, kid: 'k9' }, k9), 'unknown_kid'),
    no('another application', file({ ...base, app_id: 'another-app-0001' }), 'wrong_app'),
    no('another machine', file({ ...base, hwid: createHash('sha256').update('another-machine', 'utf8').digest('hex') }), 'wrong_hwid'),
    no('now exactly valid_until', valid, 'expired', { now: issued + 7 * DAY }),
    no('a week after valid_until', valid, 'expired', { now: issued + 14 * DAY }),
    no('issued 301 s ahead of the clock', file({ ...base, issued_at: iso(NOW + 301), valid_until: iso(NOW + 301 + DAY) }), 'issued_in_future'),
    no('clock 301 s below the latest time seen', valid, 'clock_rolled_back', { last_seen: NOW + 301 }),
    no('clock set back a month to revive an expired file', valid, 'clock_rolled_back', { now: NOW - 30 * DAY, last_seen: issued + 14 * DAY }),
    // The order of the checks is part of the contract: these fail two ways and name the first.
    no('another machine and expired: the machine is checked first', file({ ...base, hwid: 'f'.repeat(64) }), 'wrong_hwid', { now: issued + 14 * DAY }),
    no('rolled back and expired: the clock is checked first', valid, 'clock_rolled_back', { now: issued + 14 * DAY, last_seen: issued + 30 * DAY }),
    no('unpinned kid and another app: the kid is checked first', file({ ...base, kid: 'k9', app_id: 'x' }, k9), 'unknown_kid'),

    no('empty', '', 'malformed'),
    no('two parts', `kwlic1.${validPayload}`, 'malformed'),
    no('four parts', `${valid}.AAAA`, 'malformed'),
    no('another format tag', `kwlic2.${validPayload}.${validSig}`, 'malformed'),
    no('base64 padding in the payload', `kwlic1.${validPayload}=.${validSig}`, 'malformed'),
    no('a character outside base64url', `kwlic1.${validPayload.slice(0, -1)}+.${validSig}`, 'malformed'),
    no('signature of 63 bytes', `kwlic1.${validPayload}.${b64url(Buffer.alloc(63, 7))}`, 'malformed'),
    no('signed payload that is not JSON', licenseFile(k1, 'not json'), 'malformed'),
    no('signed payload that is a JSON array', licenseFile(k1, '[1]'), 'malformed'),
    no('signed payload that is not UTF-8', licenseFile(k1, Buffer.concat([Buffer.from('{"v":1,"kid":"k1","x":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')])), 'malformed'),
    no('format version 2', file({ ...base, v: 2 }), 'malformed'),
    no('valid_until missing', file(Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'valid_until'))), 'malformed'),
    no('issued_at in unix seconds', file({ ...base, issued_at: issued }), 'malformed'),
    no('valid_until without a time zone', file({ ...base, valid_until: iso(issued + 7 * DAY).replace('Z', '') }), 'malformed'),
    no('level a string', file({ ...base, level: '3' }), 'malformed'),
    no('entitlements not a list of strings', file({ ...base, entitlements: 'pro' }), 'malformed'),
    no('hwid missing', file(Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'hwid'))), 'malformed'),
    // user and expires_at are null when there is none, never absent.
    no('user missing', file(Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'user'))), 'malformed'),
    no('expires_at missing', file(Object.fromEntries(Object.entries(base).filter(([k]) => k !== 'expires_at'))), 'malformed'),
    no('malformed payload under an unpinned kid: malformed comes first', file({ ...base, kid: 'k9', v: 2 }, k9), 'malformed'),
  ];
  return {
    k1, k2, cases: cases.map((c) => ({
      name: c.name, file: c.file, now: c.now ?? at.now, last_seen: c.last_seen === undefined ? at.last_seen : c.last_seen,
      app_id: c.app_id ?? at.app_id, hwid: c.hwid ?? at.hwid, valid: c.valid,
      ...(c.reason ? { reason: c.reason } : {}), ...(c.payload ? { payload: c.payload } : {}),
    })),
  };
}

/** What an answer's grace_until grants at `now` (docs/protocol.md 12.6): a time, or nothing. */
function graceCases() {
  const until = NOW + 3600;
  return [
    { name: 'an hour of grace', grace_until: iso(until), now: NOW, until, active: true },
    { name: 'one second before the end', grace_until: iso(until), now: until - 1, until, active: true },
    { name: 'exactly at grace_until it is over', grace_until: iso(until), now: until, until, active: false },
    { name: 'without milliseconds', grace_until: '2026-01-01T01:00:00Z', now: NOW, until, active: true },
    { name: 'microseconds are cut to milliseconds', grace_until: '2026-01-01T00:59:59.999999Z', now: until - 1, until: until - 0.001, active: true },
    { name: 'absent: the answer grants no grace', now: NOW, until: null, active: false },
    { name: 'null grants none', grace_until: null, now: NOW, until: null, active: false },
    { name: 'unix seconds are not a time (none)', grace_until: until, now: NOW, until: null, active: false },
    { name: 'not a time (none)', grace_until: 'tomorrow', now: NOW, until: null, active: false },
    { name: 'no time zone (none)', grace_until: '2026-01-01T01:00:00.000', now: NOW, until: null, active: false },
    { name: 'month 13 (none)', grace_until: '2026-13-01T01:00:00.000Z', now: NOW, until: null, active: false },
  ];
}

export function buildOfflineVectors(): string {
  const { k1, k2, cases } = offlineCases();
  const v = {
    description: 'docs/protocol.md 12.5 and 12.6. FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519-sign("kwlic1." base64url(PAYLOAD))), '
      + 'base64url without padding. Judge `file` as the SDK of application `app_id` on machine `hwid` whose clock reads `now` '
      + '(unix seconds) and whose state file recorded `last_seen` (null: no record). See sdk/vectors/README.md for the order of the checks.',
    max_future_seconds: 300,
    max_rollback_seconds: 300,
    pinned_keys: [k1, k2].map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: k.publicKey })),
    reasons: ['malformed', 'unknown_kid', 'bad_signature', 'wrong_app', 'wrong_hwid', 'clock_rolled_back', 'issued_in_future', 'expired'],
    cases,
    grace: {
      description: 'docs/protocol.md 12.6. `grace_until` of a verified answer (absent: the key is missing) read at `now`: `until` is the '
        + 'time it grants (unix seconds, millisecond precision) or null for none; `active` = until !== null && now < until.',
      cases: graceCases(),
    },
  };
  return JSON.stringify(v, null, 2) + '\n';
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  fs.writeFileSync(path.join(VECTORS_DIR, OFFLINE_FILE), buildOfflineVectors());
  console.log(`wrote sdk/vectors/${OFFLINE_FILE}`);
}
