// The committed SDK vectors (sdk/vectors/*.json) must be exactly what the server's own code
// produces today, so a change to signing, proofs, encryption or the error catalogue cannot leave
// the SDKs testing against stale expectations. The cases are also re-checked with node:crypto,
// independently of the server's sodium-native, so the flags valid/reason are not just echoed.
import fs from 'node:fs';
import path from 'node:path';
import {
  createDecipheriv,
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  verify,
} from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildVectors, VECTORS_DIR } from '../../scripts/gen-vectors.js';
import { ERRORS } from '../../src/errors.js';
import { PROTOCOL_ENTRIES } from '../../sdk/vectors/error-map.js';

const built = buildVectors();
const load = (name: string) => JSON.parse(fs.readFileSync(path.join(VECTORS_DIR, name), 'utf8'));

describe('sdk/vectors', () => {
  it.each(Object.keys(built))('%s is up to date (npx tsx scripts/gen-vectors.ts)', (name) => {
    expect(fs.readFileSync(path.join(VECTORS_DIR, name), 'utf8')).toBe(built[name]);
  });

  it('request signatures verify with node:crypto', () => {
    for (const c of load('request-signatures.json').cases) {
      const canonical = `${c.method.toUpperCase()}\n${c.path}\n${c.timestamp}\n${c.nonce}\n${createHash('sha256').update(c.body, 'utf8').digest('hex')}`;
      expect(c.canonical).toBe(canonical);
      expect(c.signature).toBe(createHmac('sha256', Buffer.from(c.api_secret, 'utf8')).update(canonical).digest('hex'));
    }
  });

  it('response signature cases are valid or refused for the reason they name', () => {
    const v = load('response-signatures.json');
    const pinned = new Map<string, string>(
      v.pinned_keys.map((k: { kid: string; public_key: string }) => [k.kid, k.public_key]),
    );
    const check = (c: any): string => {
      const pub = pinned.get(c.kid);
      if (!pub) return 'unknown_kid';
      const sig = Buffer.from(c.signature, 'base64');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(c.signature) || sig.length !== 64) return 'bad_base64';
      if (Math.abs(Number(c.timestamp) - c.now) > v.max_skew_seconds) return 'stale';
      const key = createPublicKey({
        key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pub, 'base64').toString('base64url') },
        format: 'jwk',
      });
      const message = `kw1\n${c.kid}\n${c.method}\n${c.path}\n${c.status}\n${c.timestamp}\n${c.nonce}\n${createHash('sha256').update(c.body, 'utf8').digest('hex')}`;
      expect(c.message).toBe(message);
      return verify(null, Buffer.from(message), key, sig) ? 'ok' : 'bad_signature';
    };
    const reasons = new Set<string>();
    for (const c of v.cases) {
      expect(check(c), c.name).toBe(c.valid ? 'ok' : c.verification_reason);
      if (!c.valid) reasons.add(c.reason);
    }
    expect([...reasons].sort()).toEqual(['bad_base64', 'bad_signature', 'foreign_nonce', 'stale', 'unknown_kid']);
  });

  it('proofs match node:crypto', () => {
    const p = load('proofs.json');
    const mac = (k: string, m: string) =>
      createHmac('sha256', Buffer.from(k, 'utf8')).update(m, 'utf8').digest('base64');
    for (const c of p.start) expect(c.proof).toBe(mac(c.session, `kwhs1\n${c.system_id}\n${c.token}`));
    for (const c of p.beat)
      expect(c.proof).toBe(
        mac(c.previous_token, `kwhb1\n${c.session}\n${c.beat_index}\n${c.new_token}\n${c.beat_count}`),
      );
  });

  it('ciphertexts decrypt with node:crypto', () => {
    for (const c of load('encryption.json').cases) {
      const key = createHash('sha256').update(`${c.enc_key}-${c.api_secret}`, 'utf8').digest();
      const iv = createHash('sha256').update(c.init_iv, 'utf8').digest().subarray(0, 16);
      const d = createDecipheriv('aes-256-cbc', key, iv);
      expect(Buffer.concat([d.update(Buffer.from(c.ciphertext, 'base64')), d.final()]).toString('utf8')).toBe(
        c.plaintext,
      );
    }
  });

  it('errors.json spells every client entry exactly as the catalogue does', () => {
    const e = load('errors.json');
    // docs/protocol.md 12 answers the catalogue does not carry yet come from error-map.ts's PROTOCOL_ENTRIES.
    for (const x of e.entries) {
      const source = x.name in ERRORS ? ERRORS[x.name as keyof typeof ERRORS] : PROTOCOL_ENTRIES[x.name];
      expect({ status: x.status, detail: x.detail }, x.name).toEqual({
        status: source?.status,
        detail: source?.detail,
      });
    }
    expect(e.codes).toContain(e.fallback);
    for (const c of [...e.entries.map((x: any) => x.sdk_code), ...Object.values(e.status_fallbacks)])
      expect(e.codes).toContain(c);
    // The client-visible details a user meets first are all there.
    const names = e.entries.map((x: { name: string }) => x.name);
    for (const n of [
      'license_invalid',
      'license_used',
      'hwid_mismatch',
      'license_expired',
      'heartbeat_rejected',
      'rate_limited',
      'locked_out',
      'update_required',
    ])
      expect(names).toContain(n);
    for (const n of ['trial_disabled', 'trial_used', 'offline_disabled', 'session_limit'])
      expect(e.entries.find((x: { name: string }) => x.name === n)?.sdk_code).toBe(n);
  });

  it('channel.json: handshake, hellos and frames check out with node:crypto', () => {
    const v = load('channel.json');
    const h = v.handshake;
    const sha = (x: string | Buffer) => createHash('sha256').update(x).digest();
    // X25519 from raw secrets through PKCS#8 DER (RFC 8410 prefix), independently of sodium-native.
    const x25519Private = (hex: string) =>
      createPrivateKey({
        key: Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), Buffer.from(hex, 'hex')]),
        format: 'der',
        type: 'pkcs8',
      });
    const x25519Public = (b64url: string) =>
      createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url }, format: 'jwk' });
    expect(createPublicKey(x25519Private(h.client_secret_hex)).export({ format: 'jwk' }).x).toBe(h.client_key);
    expect(createPublicKey(x25519Private(h.server_secret_hex)).export({ format: 'jwk' }).x).toBe(h.server_key);
    const transcript = ['kwc1-hello', h.kid, h.ts, h.session, h.client_key, h.server_key, h.conn, h.beat_interval].join(
      '\n',
    );
    expect(h.transcript).toBe(transcript);
    const shared = diffieHellman({
      privateKey: x25519Private(h.client_secret_hex),
      publicKey: x25519Public(h.server_key),
    });
    expect(shared.toString('hex')).toBe(h.shared_hex);
    expect(
      diffieHellman({ privateKey: x25519Private(h.server_secret_hex), publicKey: x25519Public(h.client_key) }).toString(
        'hex',
      ),
    ).toBe(h.shared_hex);
    expect(sha(transcript).toString('hex')).toBe(h.transcript_sha256_hex);
    const okm = Buffer.from(hkdfSync('sha256', shared, sha(transcript), Buffer.from('kwc1 keys'), 64));
    expect(okm.subarray(0, 32).toString('hex')).toBe(h.s2c_hex);
    expect(okm.subarray(32).toString('hex')).toBe(h.c2s_hex);

    const pinned = new Map<string, string>(
      v.pinned_keys.map((k: { kid: string; public_key: string }) => [k.kid, k.public_key]),
    );
    const judgeHello = (c: { hello: string; session: string; client_key: string }): string => {
      let m: any;
      try {
        m = JSON.parse(c.hello);
      } catch {
        return 'malformed';
      }
      const pub = pinned.get(m.kid);
      if (!pub) return 'unknown_kid';
      const sig = Buffer.from(m.sig, 'base64');
      if (!/^[A-Za-z0-9+/]{86}==$/.test(m.sig) || sig.length !== 64) return 'bad_base64';
      if (Math.abs(m.ts - v.now) > v.max_skew_seconds) return 'stale';
      const t = ['kwc1-hello', m.kid, m.ts, c.session, c.client_key, m.server_key, m.conn, m.beat_interval].join('\n');
      const key = createPublicKey({
        key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pub, 'base64').toString('base64url') },
        format: 'jwk',
      });
      return verify(null, Buffer.from(t), key, sig) ? 'ok' : 'bad_signature';
    };
    for (const c of v.hello_cases) expect(judgeHello(c), c.name).toBe(c.valid ? 'ok' : c.reason);
    expect(v.hello_cases[0].hello).toBe(h.hello);

    const s2c = Buffer.from(h.s2c_hex, 'hex');
    const c2s = Buffer.from(h.c2s_hex, 'hex');
    const judgeFrame = (c: { frame: string; expected_seq: number }): string => {
      const f = Buffer.from(c.frame, 'base64');
      if (f.length <= 32) return 'bad_mac';
      const payload = f.subarray(32);
      if (!createHmac('sha256', s2c).update(payload).digest().equals(f.subarray(0, 32))) return 'bad_mac';
      let m: any;
      try {
        m = JSON.parse(payload.toString('utf8'));
      } catch {
        return 'malformed';
      }
      return m.seq === c.expected_seq ? 'ok' : 'out_of_order';
    };
    const reasons = new Set<string>();
    for (const c of v.server_frames) {
      expect(judgeFrame(c), c.name).toBe(c.valid ? 'ok' : c.reason);
      if (!c.valid) reasons.add(c.reason);
    }
    expect([...reasons].sort()).toEqual(['bad_mac', 'malformed', 'out_of_order']);
    for (const c of v.client_frames) {
      const payload = Buffer.from(c.payload, 'utf8');
      expect(Buffer.concat([createHmac('sha256', c2s).update(payload).digest(), payload]).toString('base64')).toBe(
        c.frame,
      );
    }
  });

  it('artifacts.json: every download is accepted or refused for the reason it names (node:crypto)', () => {
    const v = load('artifacts.json');
    const pinned = new Map<string, string>(
      v.pinned_keys.map((k: { kid: string; public_key: string }) => [k.kid, k.public_key]),
    );
    const judge = (c: any): string => {
      const a = c.artifact;
      const pub = pinned.get(a.kid);
      if (!pub) return 'unknown_kid';
      const message = `kwart1.${c.app_id}.${c.version}.${a.filename}.${a.sha512}`;
      expect(c.message, c.name).toBe(message);
      const sig = Buffer.from(a.signature, 'base64');
      const key = createPublicKey({
        key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pub, 'base64').toString('base64url') },
        format: 'jwk',
      });
      if (!/^[A-Za-z0-9+/]{86}==$/.test(a.signature) || !verify(null, Buffer.from(message, 'utf8'), key, sig))
        return 'bad_signature';
      const got = Buffer.from(c.downloaded, 'base64');
      if (got.length !== a.size) return 'size_mismatch';
      return createHash('sha512').update(got).digest('hex') === a.sha512 ? 'ok' : 'sha512_mismatch';
    };
    const seen = new Set<string>();
    for (const c of v.cases) {
      expect(judge(c), c.name).toBe(c.valid ? 'ok' : c.reason);
      if (!c.valid) seen.add(c.reason);
    }
    expect([...seen].sort()).toEqual([...v.reasons].sort());
  });
});
