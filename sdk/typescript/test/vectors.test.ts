// This SDK's crypto and error table against the shared vectors (sdk/vectors), which the server's
// own code generates: a drift on either side fails here.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  beatProof,
  canonicalRequest,
  codeFor,
  decryptResponse,
  ERROR_CODES,
  ERROR_ENTRIES,
  errorFromAnswer,
  FALLBACK_CODE,
  KeywardenError,
  graceUntilOf,
  MAX_FUTURE_SECONDS,
  MAX_ROLLBACK_SECONDS,
  pinKeys,
  requestSignature,
  startProof,
  STATUS_FALLBACKS,
  verifyLicenseFile,
  verifyPool,
  verifyResponse,
  buildRequest,
} from '../src/index.js';
import { checkRequestNonce } from '../src/airgap.js';
import { Grace } from '../src/grace.js';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../vectors');
const load = (f: string) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));

describe('vectors', () => {
  it('request signatures', () => {
    const v = load('request-signatures.json');
    expect(v.cases.length).toBeGreaterThan(0);
    for (const c of v.cases) {
      const canonical = canonicalRequest(c.method, c.path, c.timestamp, c.nonce, Buffer.from(c.body, 'utf8'));
      expect(canonical).toBe(c.canonical);
      expect(requestSignature(c.api_secret, canonical)).toBe(c.signature);
    }
  });

  it('response signatures: valid ones verify, the rest are refused for their reason', () => {
    const v = load('response-signatures.json');
    const keys = pinKeys(v.pinned_keys);
    let refused = 0;
    for (const c of v.cases) {
      const run = () =>
        verifyResponse(
          keys,
          {
            method: c.method,
            path: c.path,
            status: c.status,
            body: c.body,
            nonce: c.nonce,
            headers: {
              'x-response-kid': c.kid,
              'x-response-timestamp': c.timestamp,
              'x-response-signature': c.signature,
            },
          },
          c.now * 1000,
          v.max_skew_seconds,
        );
      if (c.valid) {
        expect(run(), c.name).toBe(Number(c.timestamp) * 1000);
      } else {
        refused++;
        let err: unknown;
        try {
          run();
        } catch (e) {
          err = e;
        }
        expect(err, c.name).toBeInstanceOf(KeywardenError);
        expect({ code: (err as KeywardenError).code, reason: (err as KeywardenError).reason }, c.name).toEqual({
          code: 'verification',
          reason: c.verification_reason,
        });
      }
    }
    expect(refused).toBeGreaterThanOrEqual(5);
    // A missing header is 'unsigned'.
    expect(() =>
      verifyResponse(keys, { method: 'POST', path: '/p', status: 200, body: '', nonce: 'n', headers: {} }, 0, 300),
    ).toThrow(expect.objectContaining({ reason: 'unsigned' }));
  });

  it('heartbeat proofs', () => {
    const v = load('proofs.json');
    for (const c of v.start) expect(startProof(c.session, c.system_id, c.token)).toBe(c.proof);
    for (const c of v.beat)
      expect(beatProof(c.previous_token, c.session, c.beat_index, c.new_token, c.beat_count)).toBe(c.proof);
  });

  it('response decryption', () => {
    for (const c of load('encryption.json').cases) {
      expect(decryptResponse(c.ciphertext, c.enc_key, c.api_secret, c.init_iv).toString('utf8')).toBe(c.plaintext);
    }
  });

  it('the embedded error table is errors.json', () => {
    const e = load('errors.json');
    expect([...ERROR_CODES]).toEqual(e.codes);
    expect(FALLBACK_CODE).toBe(e.fallback);
    expect(Object.fromEntries(Object.entries(STATUS_FALLBACKS).map(([k, v]) => [String(k), v]))).toEqual(
      e.status_fallbacks,
    );
    expect(ERROR_ENTRIES.map(([status, detail, code]) => ({ status, detail, code }))).toEqual(
      e.entries.map((x: { status: number; detail: string; sdk_code: string }) => ({
        status: x.status,
        detail: x.detail,
        code: x.sdk_code,
      })),
    );
    for (const x of [...e.entries, ...e.extra_cases])
      expect(codeFor(x.status, x.detail), JSON.stringify(x)).toBe(x.sdk_code);
  });

  it('426 and 429 carry their data', () => {
    const u = errorFromAnswer(
      426,
      { message: 'Please update', latest_version: '2.0', update_url: 'https://x/dl', force_update: true },
      undefined,
    );
    expect(u).toMatchObject({ code: 'update_required', latestVersion: '2.0', updateUrl: 'https://x/dl', status: 426 });
    expect(errorFromAnswer(429, 'Rate limit exceeded', '17')).toMatchObject({ code: 'rate_limited', retryAfter: 17 });
    expect(errorFromAnswer(429, 'Too many failed attempts, try again later.', '900')).toMatchObject({
      code: 'locked_out',
      retryAfter: 900,
    });
  });

  describe('air-gapped machines (airgap.json)', () => {
    const v = load('airgap.json');
    const keys = pinKeys(v.pinned_keys);
    const decode = (r: string) => {
      expect(r).toMatch(/^kwreq1\.[A-Za-z0-9_-]+$/);
      return JSON.parse(Buffer.from(r.slice(7), 'base64url').toString('utf8'));
    };
    const refusal = (run: () => unknown) => {
      try {
        run();
      } catch (e) {
        expect(e).toBeInstanceOf(KeywardenError);
        expect((e as KeywardenError).code).toBe('offline_invalid');
        return (e as KeywardenError).reason;
      }
      return 'ok';
    };

    it('requests carry exactly the fields of each case', () => {
      for (const c of v.requests.cases)
        expect(decode(buildRequest(c.app_id, c.key, c.hwid, c.nonce, c.created_at, c.components)), c.name).toEqual(
          decode(c.request),
        );
    });

    it("answers are accepted only for the latest request's nonce", () => {
      const seen = new Set<string>();
      for (const c of v.responses.cases) {
        const got = refusal(() => {
          verifyLicenseFile(c.file, keys, c.app_id, c.hwid, c.now * 1000, c.last_seen ?? undefined);
          checkRequestNonce(c.file, c.nonce ?? undefined);
        });
        expect(got, c.name).toBe(c.valid ? 'ok' : c.reason);
        if (!c.valid) seen.add(c.reason);
      }
      expect([...seen].sort()).toEqual([...v.responses.reasons].sort());
    });

    it('pools: accepted, or refused for the reason each case names', () => {
      const seen = new Set<string>();
      for (const c of v.pools.cases) {
        const got = refusal(() => {
          const pool = verifyPool(c.pool, keys, c.app_id, c.now * 1000);
          const p = c.payload;
          expect([pool.appId, pool.licenseId, pool.relayId, pool.seats, pool.level, pool.kid]).toEqual([
            p.app_id,
            p.license_id,
            p.relay_id,
            p.seats,
            p.level,
            p.kid,
          ]);
          expect(pool.entitlements).toEqual([...p.entitlements].sort());
          expect(pool.expiresAt?.toISOString() ?? null).toBe(p.expires_at);
        });
        expect(got, c.name).toBe(c.valid ? 'ok' : c.reason);
        if (!c.valid) seen.add(c.reason);
      }
      expect([...seen].sort()).toEqual([...v.pools.reasons].sort());
    });
  });

  it('offline license files: accepted, or refused for the reason each case names', () => {
    const v = load('offline.json');
    expect([v.max_future_seconds, v.max_rollback_seconds]).toEqual([MAX_FUTURE_SECONDS, MAX_ROLLBACK_SECONDS]);
    const keys = pinKeys(v.pinned_keys);
    const seen = new Set<string>();
    for (const c of v.cases) {
      const run = () =>
        verifyLicenseFile(
          c.file,
          keys,
          c.app_id,
          c.hwid,
          c.now * 1000,
          c.last_seen === null ? undefined : c.last_seen * 1000,
        );
      if (c.valid) {
        const lic = run();
        const p = c.payload;
        expect(
          {
            appId: lic.appId,
            licenseId: lic.licenseId,
            user: lic.user,
            hwid: lic.hwid,
            level: lic.level,
            kid: lic.kid,
          },
          c.name,
        ).toEqual({ appId: p.app_id, licenseId: p.license_id, user: p.user, hwid: p.hwid, level: p.level, kid: p.kid });
        expect(lic.entitlements).toEqual([...p.entitlements].sort());
        expect(lic.validUntil.toISOString()).toBe(p.valid_until);
        expect(lic.expiresAt?.toISOString() ?? null).toBe(p.expires_at);
        continue;
      }
      let err: unknown;
      try {
        run();
      } catch (e) {
        err = e;
      }
      expect(err, c.name).toBeInstanceOf(KeywardenError);
      expect({ code: (err as KeywardenError).code, reason: (err as KeywardenError).reason }, c.name).toEqual({
        code: 'offline_invalid',
        reason: c.reason,
      });
      seen.add(c.reason);
    }
    expect([...seen].sort()).toEqual([...v.reasons].sort());
  });

  it('grace_until: what each value grants', () => {
    for (const c of load('offline.json').grace.cases) {
      const answer: Record<string, unknown> = 'grace_until' in c ? { grace_until: c.grace_until } : {};
      expect(graceUntilOf(answer) ?? null, c.name).toBe(c.until === null ? null : Math.round(c.until * 1000));
      const g = new Grace();
      g.note(answer);
      expect(g.active(c.now * 1000), c.name).toBe(c.active);
    }
  });
});
