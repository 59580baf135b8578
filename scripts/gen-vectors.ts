// Writes the shared SDK test vectors (sdk/vectors/*.json) with the server's own code: the request
// canonical string and HMAC, the response signer, the heartbeat proofs, the response encryption and
// the error catalogue. Every input is fixed, so the output is byte-for-byte deterministic
// (Ed25519 signatures, HMAC and AES-CBC with a fixed IV all are); test/sdk/vectors.test.ts
// regenerates them in memory and fails when the committed files differ.
//
//   npx tsx scripts/gen-vectors.ts            write sdk/vectors/*.json
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ed25519Sign, hmacSha256, sha256, signingKeyFromSeed, x25519, x25519PublicKey } from '../src/platform/crypto/index.js';
import { createHash } from 'node:crypto';
import { buildHello, deriveKeys, helloTranscript, sealFrame } from '../src/modules/realtime/client-channel.protocol.js';
import { canonicalRequest, encryptBody, responseMessage, signReply } from '../src/platform/http/client-signing.js';
import { beatProof, startProof } from '../src/modules/heartbeat/heartbeat.gateway.js';
import { ERRORS, type ErrorCode } from '../src/errors.js';
import { ERROR_MAP, FALLBACK_CODE, PROTOCOL_ENTRIES, SDK_CODES, STATUS_FALLBACKS, type SdkCode } from '../sdk/vectors/error-map.js';

export const VECTORS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../sdk/vectors');

/** Test-only seeds, derived from a label so anyone can re-derive them. Never use them for real. */
const seedOf = (label: string) => sha256(`keywarden-test-vector-seed:${label}`);
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const json = (v: unknown) => JSON.stringify(v, null, 2) + '\n';

function requestSignatures() {
  const inputs = [
    { method: 'POST', path: '/api/client/init', timestamp: '1767225600', nonce: 'AAAAAAAAAAAAAAAAAAAAAA', body: '{"api_key":"kwpk_test","version":"1.0"}', api_secret: 'kwsk_test_secret_0001' },
    { method: 'POST', path: '/api/client/login', timestamp: '1767225661', nonce: 'nonce-with_dash-0123456789', body: '{"session":"s","username":"jürgen","password":"pässwörd-✓","hwid":"hwid-00000001"}', api_secret: 'kwsk_test_secret_0001' },
    { method: 'POST', path: '/api/client/heartbeat', timestamp: '1767225999', nonce: 'Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09_-Zz09', body: '', api_secret: 'secret with spaces and ünïcode' },
    { method: 'post', path: '/api/client/license', timestamp: '0', nonce: 'lowercase-method-0001', body: '{}', api_secret: 'x' },
  ];
  const cases = inputs.map((c) => {
    const canonical = canonicalRequest(c.method, c.path, c.timestamp, c.nonce, Buffer.from(c.body, 'utf8'));
    return { ...c, canonical, signature: hmacSha256(c.api_secret, canonical).toString('hex') };
  });
  return {
    description: 'docs/protocol.md 3. canonical = METHOD(upper-cased) \\n PATH \\n X-Timestamp \\n X-Nonce \\n hex(sha256(utf8 body)); signature = hex(HMAC-SHA256(utf8(api_secret), canonical))',
    cases,
  };
}

function responseSignatures() {
  const k1 = { kid: 'k1', ...signingKeyFromSeed(seedOf('k1')) };
  const k2 = { kid: 'k2', ...signingKeyFromSeed(seedOf('k2')) };
  const k9 = { kid: 'k9', ...signingKeyFromSeed(seedOf('k9-not-pinned')) };
  const now = 1767225600;
  const sign = (key: typeof k1, c: { method: string; path: string; status: number; timestamp: number; nonce: string; body: string }) =>
    signReply({ status: c.status, body: c.body, headers: {} }, key, c.method, c.path, c.nonce, c.timestamp * 1000).headers['X-Response-Signature']!;
  const base = { method: 'POST', path: '/api/client/init', status: 200, nonce: 'client-nonce-000000000001', body: '{"success":true,"session":"abc","app":{"name":"Demo ✓","version":"1.0","hwid_lock":false}}' };
  type Case = { name: string; key: typeof k1; kid?: string; timestamp: number; signedNonce?: string; signature?: string; valid: boolean; reason?: string; verification_reason?: string } & Partial<typeof base>;
  const specs: Case[] = [
    { name: 'init success', key: k1, timestamp: now, valid: true },
    { name: 'failure answers are signed too', key: k1, timestamp: now - 3, status: 401, path: '/api/client/login', body: '{"detail":"Invalid username or password"}', valid: true },
    { name: '429 with empty nonce', key: k1, timestamp: now, status: 429, path: '/api/client/license', nonce: '', body: '{"detail":"Rate limit exceeded"}', valid: true },
    { name: 'second pinned key', key: k2, timestamp: now + 10, path: '/api/client/heartbeat', body: '{"success":true,"new_token":"TT00112233445566778899aabbccddeeff","beat_count":1,"proof":"x"}', valid: true },
    { name: 'empty body (405)', key: k1, timestamp: now, status: 405, path: '/api/client/init', body: '', valid: true },
    { name: 'timestamp exactly 300 s old is accepted', key: k1, timestamp: now - 300, valid: true },
    { name: 'timestamp exactly 300 s ahead is accepted', key: k1, timestamp: now + 300, valid: true },
    { name: 'timestamp 301 s old', key: k1, timestamp: now - 301, valid: false, reason: 'stale', verification_reason: 'stale' },
    { name: 'timestamp 1000 s old', key: k1, timestamp: now - 1000, valid: false, reason: 'stale', verification_reason: 'stale' },
    { name: 'timestamp 400 s in the future', key: k1, timestamp: now + 400, valid: false, reason: 'stale', verification_reason: 'stale' },
    { name: 'body byte flipped', key: k1, timestamp: now, valid: false, reason: 'bad_signature', verification_reason: 'bad_signature' },
    { name: 'signed by a key under an unpinned kid', key: k9, timestamp: now, valid: false, reason: 'unknown_kid', verification_reason: 'unknown_kid' },
    { name: 'kid header names k1 but a foreign key signed', key: k9, kid: 'k1', timestamp: now, valid: false, reason: 'bad_signature', verification_reason: 'bad_signature' },
    { name: 'signature not base64', key: k1, timestamp: now, signature: '!!notbase64!!', valid: false, reason: 'bad_base64', verification_reason: 'bad_base64' },
    { name: 'signature base64 of 63 bytes', key: k1, timestamp: now, signature: b64(Buffer.alloc(63, 7)), valid: false, reason: 'bad_base64', verification_reason: 'bad_base64' },
    { name: 'signed over another request nonce (replayed answer)', key: k1, timestamp: now, signedNonce: 'someone-elses-nonce-0001', valid: false, reason: 'foreign_nonce', verification_reason: 'bad_signature' },
    { name: 'status changed', key: k1, timestamp: now, valid: false, reason: 'bad_signature', verification_reason: 'bad_signature' },
  ];
  const cases = specs.map((s) => {
    const c = { method: s.method ?? base.method, path: s.path ?? base.path, status: s.status ?? base.status, nonce: s.nonce ?? base.nonce, body: s.body ?? base.body };
    const kid = s.kid ?? s.key.kid;
    let signature = s.signature ?? sign({ ...s.key, kid }, { ...c, timestamp: s.timestamp, nonce: s.signedNonce ?? c.nonce });
    let body = c.body;
    let status = c.status;
    if (s.name === 'body byte flipped') body = body.replace('"abc"', '"abd"');
    if (s.name === 'status changed') status = 201;
    const message = responseMessage(kid, c.method, c.path, status, String(s.timestamp), c.nonce, Buffer.from(body, 'utf8'));
    return {
      name: s.name, kid, public_key: b64(s.key.publicKey), seed: b64(seedOf(s.key === k9 ? 'k9-not-pinned' : s.key.kid)),
      method: c.method, path: c.path, status, timestamp: String(s.timestamp), nonce: c.nonce, body, now, message, signature, valid: s.valid,
      ...(s.reason ? { reason: s.reason, verification_reason: s.verification_reason } : {}),
    };
  });
  return {
    description: 'docs/protocol.md 4. A verifier pins `pinned_keys`, uses `now` (unix seconds) as its clock and `nonce` as the X-Nonce it sent; '
      + 'it refuses when the kid is not pinned, the signature is not base64 of 64 bytes, |timestamp - now| > 300, or Ed25519 does not verify `message`.',
    max_skew_seconds: 300,
    pinned_keys: [k1, k2].map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: b64(k.publicKey) })),
    cases,
  };
}

function proofs() {
  const session = 'q3Xb2v0Jm5Qk8rT1yW4zA7cD9eF2gH5jK8mN1pR4sU0';
  const start = [
    { session, system_id: 'system-0001', token: 'TT0123456789abcdef0123456789abcdef' },
    { session: 'short-session', system_id: 'Sÿstem-ünïcode', token: 'TTffffffffffffffffffffffffffffffff' },
  ].map((c) => ({ ...c, proof: startProof(c.session, c.system_id, c.token) }));
  const beat = [
    { previous_token: 'TT0123456789abcdef0123456789abcdef', session, beat_index: 1, new_token: 'TTaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', beat_count: 1 },
    { previous_token: 'TTaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', session, beat_index: 2, new_token: 'TTbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb', beat_count: 2 },
    { previous_token: 'TTbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb', session, beat_index: 7, new_token: 'TTcccccccccccccccccccccccccccccccc', beat_count: 3 },
    { previous_token: 'TTcccccccccccccccccccccccccccccccc', session, beat_index: 2147483648, new_token: 'TTdddddddddddddddddddddddddddddddd', beat_count: 4 },
  ].map((c) => ({ ...c, proof: beatProof(c.previous_token, c.session, c.beat_index, c.new_token, c.beat_count) }));
  return {
    description: 'docs/protocol.md 6. start proof = base64(HMAC-SHA256(utf8(session), "kwhs1\\n" + system_id + "\\n" + token)); '
      + 'beat proof = base64(HMAC-SHA256(utf8(previous_token), "kwhb1\\n" + session + "\\n" + beat_index + "\\n" + new_token + "\\n" + beat_count)). Integers in decimal.',
    start,
    beat,
  };
}

function encryption() {
  const inputs = [
    { enc_key: 'client-enc-key', api_secret: 'kwsk_test_secret_0001', init_iv: 'iv-seed-0001', plaintext: '{"success":true,"message":"Logged in","user":{"username":"alice","level":3,"expires_at":"2026-02-01T00:00:00.000Z"}}' },
    { enc_key: 'k', api_secret: 's', init_iv: 'exactly16bytes!!', plaintext: '0123456789abcdef' },
    { enc_key: 'ünïcode-key', api_secret: 'secret ✓', init_iv: 'x'.repeat(64), plaintext: '{"success":true,"level":1,"expires_at":null,"message":"Grüße"}' },
  ];
  const cases = inputs.map((c) => {
    const wire = JSON.parse(encryptBody(Buffer.from(c.plaintext, 'utf8'), c.enc_key, c.api_secret, c.init_iv).toString('utf8')) as { enc: string };
    return {
      ...c,
      key_hex: sha256(`${c.enc_key}-${c.api_secret}`).toString('hex'),
      iv_hex: sha256(c.init_iv).subarray(0, 16).toString('hex'),
      ciphertext: wire.enc,
    };
  });
  return {
    description: 'docs/protocol.md 5. The success body is {"enc": ciphertext}; ciphertext = base64(AES-256-CBC-PKCS7(key = sha256(utf8(enc_key + "-" + api_secret)), iv = sha256(utf8(init_iv))[0..16], utf8(plaintext))).',
    cases,
  };
}

function errors() {
  const seen = new Map<string, SdkCode>();
  const entries: { name: string; status: number; detail: string; sdk_code: SdkCode }[] = [];
  const add = (name: string, status: number, detail: string, sdk: SdkCode) => {
    const k = `${status}\n${detail}`;
    if (seen.has(k) && seen.get(k) !== sdk) throw new Error(`errors: ${status} "${detail}" maps to two SDK codes`);
    seen.set(k, sdk);
    entries.push({ name, status, detail, sdk_code: sdk });
  };
  for (const [name, sdk] of Object.entries(ERROR_MAP) as [ErrorCode, SdkCode | null][]) {
    if (sdk !== null) add(name, ERRORS[name].status, ERRORS[name].detail, sdk);
  }
  for (const [name, e] of Object.entries(PROTOCOL_ENTRIES)) {
    if (name in ERRORS) throw new Error(`errors: ${name} is in src/errors.ts now: move it from PROTOCOL_ENTRIES into ERROR_MAP`);
    add(name, e.status, e.detail, e.sdk_code);
  }
  // Answers no catalogue entry spells, resolved by the status fallbacks or the fallback code.
  const extra_cases = [
    { status: 403, detail: 'Down for maintenance until Monday.', sdk_code: 'app_disabled', why: "an app's disabled_message" },
    { status: 426, detail: { message: 'Please update', latest_version: '2.0', update_url: 'https://example.com/dl', force_update: true }, sdk_code: 'update_required', why: 'the 426 object' },
    { status: 429, detail: 'Slow down', sdk_code: 'rate_limited', why: 'any other 429' },
    { status: 422, detail: [{ loc: ['body', 'hwid'], msg: 'String should have at least 8 characters', type: 'string_too_short' }], sdk_code: FALLBACK_CODE, why: 'validation' },
    { status: 502, detail: 'Bad Gateway', sdk_code: FALLBACK_CODE, why: 'a proxy in front of the server' },
    { status: 400, detail: 'Some future error', sdk_code: FALLBACK_CODE, why: 'unknown text' },
    { status: 401, detail: 'Some future error', sdk_code: FALLBACK_CODE, why: 'unknown text' },
  ];
  return {
    description: 'Map a failure answer to an SDK code: (1) an entry whose status and detail (a string, compared exactly) match; '
      + '(2) else status_fallbacks[status]; (3) else `fallback`. network, timeout, verification, clock_skew and offline_invalid are also raised by the SDK itself '
      + '(no byte answered / no answer in time / a response or proof that does not verify / an unfixable clock / an offline license file it refuses).',
    codes: [...SDK_CODES],
    fallback: FALLBACK_CODE,
    status_fallbacks: Object.fromEntries(Object.entries(STATUS_FALLBACKS).map(([s, c]) => [s, c])),
    entries,
    extra_cases,
  };
}

function channel() {
  const k1 = { kid: 'k1', ...signingKeyFromSeed(seedOf('k1')) };
  const k9 = { kid: 'k9', ...signingKeyFromSeed(seedOf('k9-not-pinned')) };
  const now = 1767225600;
  const session = 'q3Xb2v0Jm5Qk8rT1yW4zA7cD9eF2gH5jK8mN1pR4sU0';
  const clientSecret = seedOf('channel-client-x25519');
  const serverSecret = seedOf('channel-server-x25519');
  const clientKey = x25519PublicKey(clientSecret).toString('base64url');
  const base = { ts: now, session, clientKey, conn: 'Y29ubmVjdGlvbi0wMDAx', beatInterval: 30 };
  const built = buildHello(k1, base, serverSecret)!;
  const shared = x25519(clientSecret, x25519PublicKey(serverSecret))!;
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

  // Hellos a client must refuse, each wrong in one way (`reason`: the SDK verification reason).
  const other = buildHello(k1, { ...base, session: 'another-session-0000000000000000000000000000' }, serverSecret)!;
  const foreignClient = x25519PublicKey(seedOf('channel-other-client')).toString('base64url');
  const forOther = buildHello(k1, { ...base, clientKey: foreignClient }, serverSecret)!;
  const edit = (text: string, patch: Record<string, unknown>) => JSON.stringify({ ...JSON.parse(text), ...patch });
  const helloCases = [
    { name: 'valid', hello: built.text, valid: true },
    { name: 'hello of another session', hello: other.text, valid: false, reason: 'bad_signature' },
    { name: 'hello of another connection (another client key)', hello: forOther.text, valid: false, reason: 'bad_signature' },
    { name: 'server key swapped', hello: edit(built.text, { server_key: x25519PublicKey(seedOf('mitm')).toString('base64url') }), valid: false, reason: 'bad_signature' },
    { name: 'beat_interval changed', hello: edit(built.text, { beat_interval: 300 }), valid: false, reason: 'bad_signature' },
    { name: 'kid not pinned', hello: buildHello(k9, base, serverSecret)!.text, valid: false, reason: 'unknown_kid' },
    { name: 'signature not base64 of 64 bytes', hello: edit(built.text, { sig: '!!notbase64!!' }), valid: false, reason: 'bad_base64' },
    { name: 'ts 301 s old', hello: buildHello(k1, { ...base, ts: now - 301 }, serverSecret)!.text, valid: false, reason: 'stale' },
    { name: 'ts exactly 300 s ahead', hello: buildHello(k1, { ...base, ts: now + 300 }, serverSecret)!.text, valid: true },
    { name: 'not JSON', hello: 'hello', valid: false, reason: 'malformed' },
  ];

  // Server frames, each judged by a receiver that expects `expected_seq` next.
  const frame = (key: Uint8Array, payload: string) => sealFrame(key, Buffer.from(payload, 'utf8'));
  const reply1 = '{"seq":1,"type":"reply","re":1,"status":200,"body":{"success":true,"token":"TT0123456789abcdef0123456789abcdef","beat_interval":30,"proof":"x"}}';
  const notice2 = '{"seq":2,"type":"notice","message":"Maintenance at 22:00 UTC ✓","at":"2026-01-01T00:00:00.000Z"}';
  const revoked2 = '{"seq":2,"type":"revoked","reason":"license_banned","detail":"License key is banned"}';
  const otherKeys = deriveKeys(x25519(seedOf('channel-client-2'), x25519PublicKey(serverSecret))!, helloTranscript({ ...base, clientKey: foreignClient, kid: 'k1', serverKey: x25519PublicKey(serverSecret).toString('base64url') }));
  const flipped = frame(built.keys.s2c, notice2);
  flipped[flipped.length - 3]! ^= 0x01;
  const frameCases = [
    { name: 'reply, seq 1', expected_seq: 1, frame: frame(built.keys.s2c, reply1), payload: reply1, valid: true },
    { name: 'notice, seq 2', expected_seq: 2, frame: frame(built.keys.s2c, notice2), payload: notice2, valid: true },
    { name: 'revoked, seq 2', expected_seq: 2, frame: frame(built.keys.s2c, revoked2), payload: revoked2, valid: true },
    { name: 'from another connection (its keys)', expected_seq: 2, frame: frame(otherKeys.s2c, notice2), payload: notice2, valid: false, reason: 'bad_mac' },
    { name: 'a client frame reflected back (c2s key)', expected_seq: 2, frame: frame(built.keys.c2s, notice2), payload: notice2, valid: false, reason: 'bad_mac' },
    { name: 'one byte flipped', expected_seq: 2, frame: flipped, valid: false, reason: 'bad_mac' },
    { name: 'seq 1 again (replayed on this connection)', expected_seq: 2, frame: frame(built.keys.s2c, reply1), payload: reply1, valid: false, reason: 'out_of_order' },
    { name: 'seq 3 while 2 is due (reordered or dropped)', expected_seq: 2, frame: frame(built.keys.s2c, notice2.replace('"seq":2', '"seq":3')), payload: notice2.replace('"seq":2', '"seq":3'), valid: false, reason: 'out_of_order' },
    { name: 'MAC only, no payload', expected_seq: 2, frame: frame(built.keys.s2c, '').subarray(0, 32), valid: false, reason: 'bad_mac' },
    { name: 'valid MAC over a payload that is not JSON', expected_seq: 2, frame: frame(built.keys.s2c, 'not json'), payload: 'not json', valid: false, reason: 'malformed' },
  ].map((c) => ({ ...c, frame: b64(c.frame) }));
  const beat = '{"seq":2,"type":"call","op":"heartbeat","body":{"token":"TT0123456789abcdef0123456789abcdef","system_id":"system-0001","beat_index":1,"code_hash":"c0dec0dec0dec0dec0dec0dec0dec0de"}}';
  const clientFrames = [
    { payload: '{"seq":1,"type":"call","op":"heartbeat/start","body":{"system_id":"system-0001"}}' },
    { payload: beat },
    { payload: '{"seq":3,"type":"ping"}' },
  ].map((c) => ({ ...c, frame: b64(frame(built.keys.c2s, c.payload)) }));

  return {
    description: 'docs/protocol.md "Realtime channel". X-Nonce of the upgrade = client_key = base64url(X25519(client_secret)). '
      + 'transcript = "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval; '
      + 'hello.sig = base64(Ed25519(transcript)) by the pinned kid; shared = X25519(client_secret, server_key); '
      + 'okm = HKDF-SHA256(ikm = shared, salt = sha256(transcript), info = "kwc1 keys", L = 64); s2c = okm[0..32], c2s = okm[32..64]; '
      + 'frame = HMAC-SHA256(key, payload) || payload, payload a UTF-8 JSON object whose seq counts 1, 2, ... per direction.',
    max_skew_seconds: 300,
    now,
    pinned_keys: [{ kid: k1.kid, alg: 'Ed25519', public_key: b64(k1.publicKey) }],
    handshake: {
      session,
      client_secret_hex: hex(clientSecret),
      client_key: clientKey,
      server_secret_hex: hex(serverSecret),
      server_key: x25519PublicKey(serverSecret).toString('base64url'),
      conn: base.conn,
      kid: k1.kid,
      ts: now,
      beat_interval: base.beatInterval,
      transcript: built.transcript,
      hello: built.text,
      shared_hex: hex(shared),
      transcript_sha256_hex: hex(sha256(built.transcript)),
      s2c_hex: hex(built.keys.s2c),
      c2s_hex: hex(built.keys.c2s),
    },
    hello_cases: helloCases.map((c) => ({ ...c, session, client_key: clientKey })),
    server_frames: frameCases,
    client_frames: clientFrames,
  };
}

/** The message an artifact signature covers (docs/releases.md "Artifacts"). */
const artifactMessage = (appId: string, version: string, filename: string, sha512Hex: string) =>
  `kwart1.${appId}.${version}.${filename}.${sha512Hex}`;

function artifacts() {
  const k1 = { kid: 'k1', ...signingKeyFromSeed(seedOf('k1')) };
  const k2 = { kid: 'k2', ...signingKeyFromSeed(seedOf('k2')) };
  const k9 = { kid: 'k9', ...signingKeyFromSeed(seedOf('k9-not-pinned')) };
  const appId = '6f1c2a9e-4b7d-4c1a-9e55-0a1b2c3d4e5f';
  const sha512 = (b: Buffer) => createHash('sha512').update(b).digest('hex');
  const file = Buffer.from('Keywarden test artifact ✓\n' + 'x'.repeat(200) + '\n', 'utf8');
  const other = Buffer.from('another build\n', 'utf8');
  const flipped = Buffer.from(file);
  flipped[10]! ^= 0x01;
  type Spec = {
    name: string; key: typeof k1; kid?: string; version?: string; filename?: string; signedApp?: string;
    signedVersion?: string; signedFilename?: string; signedSha?: string; signature?: string; offered?: Buffer;
    downloaded?: Buffer; valid: boolean; reason?: string;
  };
  const specs: Spec[] = [
    { name: 'valid', key: k1, valid: true },
    { name: 'valid under the second pinned key, SemVer with pre-release and build', key: k2, version: '2.0.0-rc.1+build.5', filename: 'My_App-2.0.0.x86_64.tar.gz', valid: true },
    { name: 'empty file', key: k1, offered: Buffer.alloc(0), valid: true },
    { name: 'kid not pinned', key: k9, valid: false, reason: 'unknown_kid' },
    { name: 'kid names k1 but a foreign key signed', key: k9, kid: 'k1', valid: false, reason: 'bad_signature' },
    { name: 'signature not base64 of 64 bytes', key: k1, signature: '!!notbase64!!', valid: false, reason: 'bad_signature' },
    { name: 'signed for another version', key: k1, signedVersion: '1.0.1', valid: false, reason: 'bad_signature' },
    { name: 'signed for another application', key: k1, signedApp: '00000000-0000-4000-8000-000000000000', valid: false, reason: 'bad_signature' },
    { name: 'signed for another filename', key: k1, signedFilename: 'app-linux-arm64.bin', valid: false, reason: 'bad_signature' },
    { name: 'signed over another file', key: k1, signedSha: sha512(other), valid: false, reason: 'bad_signature' },
    { name: 'download one byte short', key: k1, downloaded: file.subarray(0, file.length - 1), valid: false, reason: 'size_mismatch' },
    { name: 'download one byte longer', key: k1, downloaded: Buffer.concat([file, Buffer.from('!')]), valid: false, reason: 'size_mismatch' },
    { name: 'download of the same size, one byte flipped', key: k1, downloaded: flipped, valid: false, reason: 'sha512_mismatch' },
  ];
  const cases = specs.map((s) => {
    const version = s.version ?? '1.1.0';
    const filename = s.filename ?? 'app-linux-x64.bin';
    const offered = s.offered ?? file;
    const sha = sha512(offered);
    const signed = artifactMessage(s.signedApp ?? appId, s.signedVersion ?? version, s.signedFilename ?? filename, s.signedSha ?? sha);
    const signature = s.signature ?? b64(ed25519Sign(Buffer.from(signed, 'utf8'), s.key.secretKey));
    return {
      name: s.name, app_id: appId, version,
      artifact: { filename, size: offered.length, sha512: sha, signature, kid: s.kid ?? s.key.kid },
      message: artifactMessage(appId, version, filename, sha),
      downloaded: b64(s.downloaded ?? offered),
      valid: s.valid,
      ...(s.reason ? { reason: s.reason } : {}),
    };
  });
  return {
    description: 'docs/protocol.md 16.2/16.6. message = "kwart1." app_id "." version "." filename "." sha512 (lower-case hex of the file); '
      + 'artifact.signature = base64(Ed25519(utf8(message))) by the pinned key `artifact.kid`. Judge `downloaded` (base64 of the bytes '
      + 'a download produced) against the offered `artifact` of application `app_id`, release `version`, in this order: '
      + 'unknown_kid (kid not pinned) -> bad_signature (not base64 of 64 bytes, or Ed25519 fails) -> size_mismatch -> sha512_mismatch.',
    pinned_keys: [k1, k2].map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: b64(k.publicKey) })),
    reasons: ['unknown_kid', 'bad_signature', 'size_mismatch', 'sha512_mismatch'],
    cases,
  };
}

/** File name -> exact file content. */
export function buildVectors(): Record<string, string> {
  return {
    'request-signatures.json': json(requestSignatures()),
    'response-signatures.json': json(responseSignatures()),
    'proofs.json': json(proofs()),
    'encryption.json': json(encryption()),
    'errors.json': json(errors()),
    'channel.json': json(channel()),
    'artifacts.json': json(artifacts()),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  for (const [name, content] of Object.entries(buildVectors())) {
    fs.writeFileSync(path.join(VECTORS_DIR, name), content);
    console.log(`wrote sdk/vectors/${name}`);
  }
}
