// The licensing models of docs/protocol.md 12 against a fake transport that answers and signs like the
// server: trials, entitlements, offline license files with their state file, and the grace period of
// the client calls and of a running heartbeat (the offline state, grace_expired). The fake is reached
// only through the public `transport` option, so the SDK's own verification runs on every answer.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Client,
  defaultStateFile,
  KeywardenError,
  TransportError,
  type ExpiredEvent,
  type GraceExpiredEvent,
  type Heartbeat,
  type KeywardenConfig,
  type OfflineEvent,
  type Transport,
  type TransportRequest,
  type TransportResponse,
} from '../src/index.js';

const APP_ID = 'fake-app-0001';
const HWID = 'hwid-aaaaaaaa';
const iso = (ms: number) => new Date(ms).toISOString();
const b64url = (b: Uint8Array | string) => Buffer.from(b).toString('base64url');

type Body = Record<string, any>;
type Handler = (body: Body, f: Fake) => [number, Record<string, unknown>];

/** The client API in miniature, docs/protocol.md 4, 6 and 12 exactly; `handlers` replace single endpoints. */
class Fake {
  key = generateKeyPairSync('ed25519');
  handlers: Record<string, Handler> = {};
  /** Throws this instead of answering heartbeat calls while set (an outage). */
  outage: TransportError | undefined;
  /** Replaces an answer on the way out. */
  after: ((path: string, res: TransportResponse) => TransportResponse) | undefined;
  graceSeconds: number | undefined;
  /** The keys' expires_at; past it (enforceExpiry) beats are refused as the server's expiry kill does. */
  expiresAt = '2099-01-02T03:04:05.678Z';
  enforceExpiry = false;
  trialHours = 0;
  offlineDays = 0;
  trials = new Map<string, string>();
  keys = new Map<string, { hwid?: string; level: number; entitlements: string[] }>([
    ['KEY-GOOD-0001', { level: 3, entitlements: ['pro', 'export'] }],
    ['KEY-GOOD-0002', { level: 2, entitlements: [] }],
  ]);
  sessions = new Map<string, { key?: string; hb?: { token: string; last: number; count: number; system: string } }>();

  config(extra: Partial<KeywardenConfig> = {}): KeywardenConfig {
    const x = this.key.publicKey.export({ format: 'jwk' }).x!;
    return {
      format: 1,
      base_url: 'http://fake.invalid',
      api_key: 'kwpk_fake',
      version: '1.0',
      app_id: APP_ID,
      response_keys: [{ kid: 'k1', alg: 'Ed25519', public_key: Buffer.from(x, 'base64url').toString('base64') }],
      ...extra,
    };
  }

  granted(o: Record<string, unknown>): Record<string, unknown> {
    return this.graceSeconds === undefined ? o : { ...o, grace_until: iso(Date.now() + this.graceSeconds * 1000) };
  }

  file(payload: Record<string, unknown>): string {
    const head = `kwlic1.${b64url(JSON.stringify(payload))}`;
    return `${head}.${b64url(sign(null, Buffer.from(head), this.key.privateKey))}`;
  }

  transport: Transport = async (req: TransportRequest) => {
    const p = req.url.split('/api/client/')[1]!;
    if (this.outage && p.startsWith('heartbeat')) throw this.outage;
    const body = JSON.parse(Buffer.from(req.body).toString('utf8')) as Body;
    const [status, obj] = (this.handlers[p] ?? this.route(p))(body, this);
    const raw = JSON.stringify(status === 200 ? { success: true, ...obj } : obj);
    const ts = String(Math.floor(Date.now() / 1000));
    const msg = `kw1\nk1\nPOST\n/api/client/${p}\n${status}\n${ts}\n${req.headers['x-nonce']}\n${createHash('sha256').update(raw).digest('hex')}`;
    const res = {
      status,
      body: Buffer.from(raw),
      headers: {
        'x-response-kid': 'k1',
        'x-response-timestamp': ts,
        'x-response-signature': sign(null, Buffer.from(msg), this.key.privateKey).toString('base64'),
      },
    };
    return this.after ? this.after(p, res) : res;
  };

  private route(p: string): Handler {
    const fail = (status: number, detail: string): [number, Record<string, unknown>] => [status, { detail }];
    const routes: Record<string, Handler> = {
      init: () => {
        const session = randomBytes(32).toString('base64url');
        this.sessions.set(session, {});
        return [200, { session, app: { name: 'Fake', version: '1.0', hwid_lock: true } }];
      },
      license: (b) => {
        const k = this.keys.get(b.license);
        if (!k) return fail(400, 'Invalid license key');
        if (k.hwid && k.hwid !== b.hwid) return fail(403, 'HWID mismatch. Key locked to another device.');
        k.hwid = b.hwid;
        this.sessions.get(b.session)!.key = b.license;
        return [
          200,
          this.granted({
            message: 'ok',
            level: k.level,
            expires_at: this.expiresAt,
            entitlements: [...k.entitlements].sort(),
          }),
        ];
      },
      trial: (b) => {
        if (this.trialHours === 0) return fail(403, 'Trials are not enabled for this application.');
        const h = String(b.hwid).toLowerCase();
        if (this.trials.has(h)) return fail(403, 'Trial already used on this device.');
        const key = `TRIAL-${randomBytes(6).toString('hex').toUpperCase()}`;
        this.trials.set(h, key);
        this.keys.set(key, { hwid: h, level: 1, entitlements: [] });
        this.sessions.get(b.session)!.key = key;
        return [
          200,
          this.granted({
            message: 'Trial started',
            level: 1,
            expires_at: iso(Date.now() + this.trialHours * 3600_000),
            entitlements: [],
            key,
          }),
        ];
      },
      offline: (b) => {
        if (this.offlineDays === 0) return fail(403, 'Offline licenses are not enabled for this application.');
        const s = this.sessions.get(b.session)!;
        const k = s.key ? this.keys.get(s.key) : undefined;
        if (!k) return fail(403, 'Session not activated. Call /login, /register or /license first.');
        if (k.hwid !== String(b.hwid).toLowerCase()) return fail(403, 'HWID mismatch. Key locked to another device.');
        const now = Date.now();
        return [
          200,
          {
            license_file: this.file({
              v: 1,
              kid: 'k1',
              app_id: APP_ID,
              license_id: `lic-${s.key}`,
              user: null,
              hwid: k.hwid,
              level: k.level,
              entitlements: [...k.entitlements].sort(),
              expires_at: null,
              issued_at: iso(now),
              valid_until: iso(now + this.offlineDays * 86_400_000),
            }),
          },
        ];
      },
      'heartbeat/start': (b) => {
        const s = this.sessions.get(b.session)!;
        const token = `TT${randomBytes(16).toString('hex')}`;
        s.hb = { token, last: 0, count: 0, system: b.system_id };
        const proof = createHmac('sha256', b.session).update(`kwhs1\n${b.system_id}\n${token}`).digest('base64');
        return [200, this.granted({ token, beat_interval: 5, proof })];
      },
      heartbeat: (b) => {
        const hb = this.sessions.get(b.session)?.hb;
        if (!hb || hb.token !== b.token || b.beat_index <= hb.last) return fail(403, 'rejected');
        if (this.enforceExpiry && Date.now() >= Date.parse(this.expiresAt)) return fail(403, 'rejected');
        const previous = hb.token;
        hb.token = `TT${randomBytes(16).toString('hex')}`;
        hb.last = b.beat_index;
        hb.count++;
        const proof = createHmac('sha256', previous)
          .update(`kwhb1\n${b.session}\n${b.beat_index}\n${hb.token}\n${hb.count}`)
          .digest('base64');
        return [200, this.granted({ new_token: hb.token, beat_count: hb.count, proof })];
      },
      'heartbeat/stop': () => [200, {}],
    };
    return routes[p] ?? (() => fail(404, 'Not found'));
  }
}

let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-ts-models-'));
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

const client = (f: Fake, o: Parameters<typeof Client.fromConfig>[1] = {}) =>
  Client.fromConfig(f.config(), { transport: f.transport, stateFile: path.join(tmp, 'state.json'), retries: 0, ...o });
const failure = async (p: Promise<unknown> | (() => unknown)) => {
  let e: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (x) {
    e = x;
  }
  expect(e).toBeInstanceOf(KeywardenError);
  return e as KeywardenError;
};
/** Resolves with the first `n` events of `name`. */
const events = <T>(hb: Heartbeat, name: string, n = 1) =>
  new Promise<T[]>((resolve) => {
    const got: T[] = [];
    hb.on(name, (e: T) => {
      got.push(e);
      if (got.length === n) resolve(got);
    });
  });

describe('trials', () => {
  it('activate a key once per device, remembered for re-authentication', async () => {
    const f = new Fake();
    f.trialHours = 72;
    const c = client(f);
    await c.init();
    const t = await c.trial(HWID);
    expect(t).toMatchObject({
      key: expect.stringMatching(/^TRIAL-/),
      level: 1,
      entitlements: [],
      message: 'Trial started',
    });
    expect(t.expiresAt!.getTime()).toBeGreaterThan(Date.now() + 71 * 3600_000);
    expect(c.lastActivation).toEqual({ kind: 'license', key: t.key, hwid: HWID });
    const again = client(f);
    await again.init();
    expect(await failure(again.trial(HWID.toUpperCase()))).toMatchObject({ code: 'trial_used', status: 403 });
  });

  it('trials off is trial_disabled; an answer without a key is malformed', async () => {
    const f = new Fake();
    const c = client(f);
    await c.init();
    expect((await failure(c.trial(HWID))).code).toBe('trial_disabled');
    f.handlers.trial = () => [200, { level: 1 }];
    expect(await failure(c.trial(HWID))).toMatchObject({ code: 'verification', reason: 'malformed' });
  });
});

describe('entitlements', () => {
  it('come sorted with the license answer, on the result and the client', async () => {
    const c = client(new Fake());
    expect(c.entitlements).toEqual([]);
    await c.init();
    const lic = await c.activateLicense('KEY-GOOD-0001', HWID);
    expect(lic.entitlements).toEqual(['export', 'pro']);
    expect(c.hasEntitlement('pro') && c.hasEntitlement('export')).toBe(true);
    expect(c.hasEntitlement('enterprise')).toBe(false);
    await c.activateLicense('KEY-GOOD-0002', HWID);
    expect(c.entitlements).toEqual([]);
  });

  it('anything but a list of codes is malformed', async () => {
    for (const bad of ['pro', [1], { pro: true }]) {
      const f = new Fake();
      f.handlers.license = () => [200, { level: 3, entitlements: bad }];
      const c = client(f);
      await c.init();
      expect((await failure(c.activateLicense('KEY-GOOD-0001', HWID))).reason).toBe('malformed');
    }
  });
});

describe('offline license files', () => {
  const activated = async (f: Fake, o: Parameters<typeof Client.fromConfig>[1] = {}) => {
    f.offlineDays = 7;
    const c = client(f, o);
    await c.init();
    await c.activateLicense('KEY-GOOD-0001', HWID);
    return c;
  };

  it('round trip: from the server, then checked with no service at all', async () => {
    const f = new Fake();
    const file = await (await activated(f)).offlineFile(HWID);
    const offline = Client.fromConfig(f.config(), {
      transport: () => {
        throw new Error('no call expected');
      },
      stateFile: path.join(tmp, 'state.json'),
    });
    const lic = offline.loadOffline(`${file}\n`, HWID);
    expect(lic).toMatchObject({
      appId: APP_ID,
      hwid: HWID,
      level: 3,
      entitlements: ['export', 'pro'],
      user: null,
      expiresAt: null,
    });
    expect(lic.validUntil.getTime() - lic.issuedAt.getTime()).toBe(7 * 86_400_000);
    expect(offline.hasEntitlement('pro')).toBe(true);
    expect(await failure(() => offline.loadOffline(file, 'hwid-bbbbbbbb'))).toMatchObject({
      code: 'offline_invalid',
      reason: 'wrong_hwid',
    });
  });

  it('refusals of the server are typed; another key, another app and a config without app_id are refused', async () => {
    const f = new Fake();
    const c = await activated(f);
    expect((await failure(c.offlineFile('hwid-bbbbbbbb'))).code).toBe('hwid_mismatch');
    const file = await c.offlineFile(HWID);
    const other = new Fake();
    expect(
      (
        await failure(() =>
          Client.fromConfig(other.config(), {
            transport: other.transport,
            stateFile: path.join(tmp, 's2'),
          }).loadOffline(file, HWID),
        )
      ).reason,
    ).toBe('bad_signature');
    expect(
      (
        await failure(() =>
          Client.fromConfig(f.config({ app_id: 'another' }), { stateFile: path.join(tmp, 's3') }).loadOffline(
            file,
            HWID,
          ),
        )
      ).reason,
    ).toBe('wrong_app');
    const { app_id: _drop, ...noId } = f.config();
    expect(() => Client.fromConfig(noId as KeywardenConfig).loadOffline(file, HWID)).toThrow(/app_id missing/);
    f.offlineDays = 0;
    expect(await failure(c.offlineFile(HWID))).toMatchObject({ code: 'offline_disabled', status: 403 });
  });

  it('the state file catches a clock set back, and is never lowered', async () => {
    let shift = 0;
    const f = new Fake();
    const c = await activated(f, { clock: () => Date.now() + shift });
    const file = await c.offlineFile(HWID);
    c.loadOffline(file, HWID);
    const state = path.join(tmp, 'state.json');
    expect(c.stateFile).toBe(state);
    const first = JSON.parse(fs.readFileSync(state, 'utf8'));
    expect(first.v).toBe(1);
    expect(Math.abs(first.last_seen - Date.now() / 1000)).toBeLessThan(5);
    shift = 3 * 86_400_000;
    c.loadOffline(file, HWID);
    shift = 86_400_000;
    expect((await failure(() => c.loadOffline(file, HWID))).reason).toBe('clock_rolled_back');
    expect(JSON.parse(fs.readFileSync(state, 'utf8')).last_seen).toBeGreaterThan(Date.now() / 1000 + 2.9 * 86_400);
    shift = 8 * 86_400_000;
    expect((await failure(() => c.loadOffline(file, HWID))).reason).toBe('expired');
  });

  it('a damaged state file counts as no record and is rewritten; an unwritable one does not stop the check', async () => {
    const f = new Fake();
    const c = await activated(f);
    const file = await c.offlineFile(HWID);
    const state = path.join(tmp, 'state.json');
    for (const junk of ['', 'not json', '{"last_seen":"yesterday"}', Buffer.from([0xff, 0xfe]), '[1]']) {
      fs.writeFileSync(state, junk);
      expect(c.loadOffline(file, HWID).level).toBe(3);
      expect(Number.isInteger(JSON.parse(fs.readFileSync(state, 'utf8')).last_seen)).toBe(true);
    }
    fs.writeFileSync(path.join(tmp, 'a-file'), 'x');
    const blocked = Client.fromConfig(f.config(), { stateFile: path.join(tmp, 'a-file', 'state.json') });
    expect(blocked.loadOffline(file, HWID).level).toBe(3);
  });

  it('the default state file is per user and application', () => {
    const p = defaultStateFile('kwpk_app_one', 'linux', { XDG_STATE_HOME: '/tmp/xdg-state' });
    expect(path.dirname(p)).toBe('/tmp/xdg-state/keywarden');
    expect(path.basename(p)).toMatch(/^[0-9a-f]{16}\.json$/);
    expect(defaultStateFile('kwpk_app_two', 'linux', { XDG_STATE_HOME: '/tmp/xdg-state' })).not.toBe(p);
    expect(path.dirname(defaultStateFile('k', 'linux', {}))).toBe(
      path.join(os.homedir(), '.local', 'state', 'keywarden'),
    );
    expect(defaultStateFile('k', 'win32', { LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' })).toContain('Keywarden');
  });
});

describe('grace period of the calls', () => {
  it('verified answers set it; a verified refusal ends it; 429 ends nothing', async () => {
    const f = new Fake();
    f.graceSeconds = 3600;
    const c = client(f);
    await c.init();
    expect(c.graceUntil).toBeNull();
    await c.activateLicense('KEY-GOOD-0001', HWID);
    expect(Math.abs(c.graceUntil!.getTime() - Date.now() - 3600_000)).toBeLessThan(5000);
    expect(c.graceActive()).toBe(true);
    f.handlers.license = () => [429, { detail: 'Rate limit exceeded' }];
    expect((await failure(c.activateLicense('KEY-GOOD-0001', HWID))).code).toBe('rate_limited');
    expect(c.graceActive()).toBe(true);
    delete f.handlers.license;
    expect((await failure(c.activateLicense('KEY-UNKNOWN', HWID))).code).toBe('invalid_key');
    expect(c.graceUntil).toBeNull();
    f.graceSeconds = undefined;
    await c.activateLicense('KEY-GOOD-0001', HWID);
    expect(c.graceUntil).toBeNull();
  });

  it('an answer that fails verification grants nothing', async () => {
    const f = new Fake();
    f.graceSeconds = 600;
    const c = client(f);
    await c.init();
    await c.activateLicense('KEY-GOOD-0001', HWID);
    const before = c.graceUntil;
    f.graceSeconds = 30 * 86_400;
    f.after = (_p, res) => ({ ...res, headers: { ...res.headers, 'x-response-kid': 'k9' } });
    expect(await failure(c.activateLicense('KEY-GOOD-0001', HWID))).toMatchObject({
      code: 'verification',
      reason: 'unknown_kid',
    });
    expect(c.graceUntil).toEqual(before);
  });

  it('an unsigned gateway 502/503/504 is the service unreachable, not an attack; an unsigned 500 is', async () => {
    const f = new Fake();
    const c = client(f);
    await c.init();
    for (const status of [502, 503, 504]) {
      f.after = () => ({
        status,
        headers: { 'content-type': 'text/html' },
        body: Buffer.from('<html>bad gateway</html>'),
      });
      expect(await failure(c.activateLicense('KEY-GOOD-0001', HWID))).toMatchObject({
        code: 'server',
        status,
        reason: undefined,
      });
    }
    f.after = () => ({ status: 500, headers: {}, body: Buffer.from('oops') });
    expect((await failure(c.activateLicense('KEY-GOOD-0001', HWID))).reason).toBe('unsigned');
  });
});

describe('grace period in a running heartbeat', () => {
  const running = async (f: Fake, clock?: () => number) => {
    const c = client(f, clock ? { clock } : {});
    await c.init();
    await c.activateLicense('KEY-GOOD-0001', HWID);
    const hb = await c.startHeartbeat('system-0001', 'c0dec0dec0de', { intervalMs: 10, debuggerDetected: () => false });
    return { c, hb };
  };
  const reset = new TransportError('network', true, 'connection reset');

  it('unreachable within the grace is offline until a beat verifies', async () => {
    const f = new Fake();
    f.graceSeconds = 3600;
    const { c, hb } = await running(f);
    await events(hb, 'beat');
    const offline = events<OfflineEvent>(hb, 'offline');
    const degraded = events(hb, 'degraded', 3);
    f.outage = reset;
    const [ev] = await offline;
    expect(ev!.error.code).toBe('network');
    expect(Math.abs(ev!.graceUntil.getTime() - Date.now() - 3600_000)).toBeLessThan(10_000);
    expect(hb.state).toBe('offline');
    expect(c.graceActive()).toBe(true);
    await degraded;
    const back = events(hb, 'beat');
    f.outage = undefined;
    await back;
    expect(hb.state).toBe('healthy');
    await hb.stop();
  });

  it('the grace runs out while unreachable: grace_expired once, state degraded', async () => {
    let shift = 0;
    const f = new Fake();
    f.graceSeconds = 60;
    const { c, hb } = await running(f, () => Date.now() + shift);
    const offline = events(hb, 'offline');
    const expired: GraceExpiredEvent[] = [];
    hb.on('grace_expired', (e: GraceExpiredEvent) => expired.push(e));
    f.outage = reset;
    await offline;
    shift = 120_000;
    await events(hb, 'degraded', 3);
    expect(expired).toHaveLength(1);
    expect(expired[0]!.graceUntil).toEqual(c.graceUntil);
    expect(c.graceActive()).toBe(false);
    expect(hb.state).toBe('degraded');
    await hb.stop();
  });

  it('leaves offline the moment grace_until passes, before any beat fails', async () => {
    let shift = 0;
    const f = new Fake();
    f.graceSeconds = 60;
    const { c, hb } = await running(f, () => Date.now() + shift);
    const seen: string[] = [];
    const offline = events(hb, 'offline');
    hb.once('offline', () => {
      seen.push(hb.state);
      shift = 61_000; // synchronously, inside the failed beat: no beat can run before the next line
      seen.push(hb.state);
    });
    f.outage = reset;
    await offline;
    expect(seen).toEqual(['offline', 'degraded']);
    expect(c.graceActive()).toBe(false);
    await hb.stop();
  });

  it('unreachable without grace is only degraded', async () => {
    const f = new Fake();
    const { hb } = await running(f);
    const offline: unknown[] = [];
    hb.on('offline', (e) => offline.push(e));
    f.outage = reset;
    await events(hb, 'degraded', 3);
    expect(hb.state).toBe('degraded');
    expect(offline).toEqual([]);
    await hb.stop();
  });

  it('a beat whose proof fails extends nothing; a verified refusal ends the grace at once', async () => {
    const f = new Fake();
    f.graceSeconds = 60;
    const { c, hb } = await running(f);
    const started = c.graceUntil;
    f.graceSeconds = 30 * 86_400;
    f.handlers.heartbeat = () => [
      200,
      f.granted({ new_token: `TT${'e'.repeat(32)}`, beat_count: 1, proof: 'bm9wZQ==' }),
    ];
    const [, second] = await events<{ error: KeywardenError }>(hb, 'degraded', 2);
    expect(second!.error.reason).toBe('bad_proof');
    expect(c.graceUntil).toEqual(started);
    const killed = events(hb, 'killed');
    f.handlers.heartbeat = () => [403, { detail: 'rejected' }];
    await killed;
    expect(c.graceUntil).toBeNull();
  });
});

describe('expiry while running (docs/protocol.md 12.8)', () => {
  /** A heartbeat on a key that expires `inMs` from now, beating every `intervalMs`. */
  const running = async (f: Fake, inMs: number, intervalMs: number) => {
    f.expiresAt = iso(Date.now() + inMs);
    const c = client(f);
    await c.init();
    await c.activateLicense('KEY-GOOD-0001', HWID);
    expect(c.expiresAt?.toISOString()).toBe(f.expiresAt);
    const hb = await c.startHeartbeat('system-0001', 'c0dec0dec0de', { intervalMs, debuggerDetected: () => false });
    const beats: number[] = [];
    hb.on('beat', () => beats.push(Date.now()));
    return { c, hb, beats };
  };
  const reset = new TransportError('network', true, 'connection reset');

  it('a beat refused after the known expiry is expired (killed with code expired), on time over REST, no grace', async () => {
    const f = new Fake();
    f.graceSeconds = 3600;
    f.enforceExpiry = true;
    // A beat a minute: only the beat just after the expiry can tell it within seconds.
    const { c, hb, beats } = await running(f, 300, 60_000);
    const expired = events<ExpiredEvent>(hb, 'expired');
    const killed = events<{ error: KeywardenError }>(hb, 'killed');
    const [ev] = await expired;
    const at = Date.now();
    expect(ev!.expiresAt?.toISOString()).toBe(f.expiresAt);
    expect(at - Date.parse(f.expiresAt)).toBeGreaterThanOrEqual(0);
    expect(at - Date.parse(f.expiresAt)).toBeLessThan(2500);
    const [k] = await killed;
    expect(k!.error.code).toBe('expired');
    expect(hb.state).toBe('expired');
    expect(hb.running).toBe(false);
    expect(c.graceUntil).toBeNull();
    expect(beats).toEqual([]);
  });

  it('no answer after the known expiry is expired too: the grace never covers an expiry', async () => {
    const f = new Fake();
    f.graceSeconds = 3600;
    const { c, hb } = await running(f, 300, 60_000);
    const revoked: unknown[] = [];
    hb.on('revoked', (e) => revoked.push(e));
    f.outage = reset;
    const [k] = await events<{ error: KeywardenError }>(hb, 'killed');
    expect(k!.error.code).toBe('expired');
    expect(hb.state).toBe('expired');
    expect(c.graceActive()).toBe(false);
    expect(revoked).toEqual([]);
  });

  it('a refusal long before the known expiry is a plain kill, not an expiry', async () => {
    const f = new Fake();
    const { hb } = await running(f, 3600_000, 20);
    await events(hb, 'beat');
    const expired: unknown[] = [];
    hb.on('expired', (e) => expired.push(e));
    f.handlers.heartbeat = () => [403, { detail: 'rejected' }];
    const [k] = await events<{ error: KeywardenError }>(hb, 'killed');
    expect(k!.error.code).toBe('heartbeat_killed');
    expect(hb.state).toBe('killed');
    expect(expired).toEqual([]);
  });

  it('beats accepted well after the known expiry (the key was extended) go on, and the expiry is forgotten', async () => {
    const f = new Fake();
    const { c, hb, beats } = await running(f, 200, 400);
    const expired: unknown[] = [];
    hb.on('expired', (e) => expired.push(e));
    while (c.expiresAt !== null) await events(hb, 'beat');
    expect(Date.now() - Date.parse(f.expiresAt)).toBeGreaterThanOrEqual(1500);
    await events(hb, 'beat');
    expect(hb.state).toBe('healthy');
    expect(expired).toEqual([]);
    expect(beats.length).toBeGreaterThanOrEqual(5);
    await hb.stop();
  });
});
