// The Keywarden client: every call carries a fresh nonce (and an HMAC when the config holds a
// secret), and every answer is verified against the pinned keys before a byte of it is believed
// (docs/protocol.md 3-5). Failures are KeywardenErrors; nothing here exits or throws untyped errors at
// the host program.
import { randomBytes } from 'node:crypto';
import type { KeywardenConfig } from './config.js';
import { loadConfigFile, parseConfig } from './config.js';
import { canonicalRequest, decryptResponse, proofEquals, requestSignature, startProof } from './crypto.js';
import { pinKeys, verifyResponse, type PinnedKeys } from './verify.js';
import { KeywardenError, errorFromAnswer, verificationError } from './errors.js';
import { Grace, isRefusal } from './grace.js';
import { ClockRecord, defaultStateFile, verifyLicenseFile, type OfflineLicense } from './offline.js';
import { parseUtcMs } from './utc.js';
import { checkRequestNonce, RequestStore, SeatLease } from './airgap.js';
import { defaultTransport, TransportError, type Transport } from './transport.js';
import { machineHwid, selfHash } from './machine.js';
import { Heartbeat, type HeartbeatOptions } from './heartbeat.js';
import { ChannelLink, type ChannelContext } from './channel.js';
import { downloadArtifact, parseOffer, type Artifact, type ProgressCallback, type UpdateOffer } from './updates.js';

export interface Logger {
  debug?(msg: string, fields?: Record<string, unknown>): void;
  info?(msg: string, fields?: Record<string, unknown>): void;
  warn?(msg: string, fields?: Record<string, unknown>): void;
  error?(msg: string, fields?: Record<string, unknown>): void;
}

export interface ClientOptions {
  /** Overrides the config's base_url. */
  baseUrl?: string;
  /** Per-call timeout, ms. Default 10 000. */
  timeoutMs?: number;
  /** Extra attempts for a call that certainly never reached the server. Default 2. */
  retries?: number;
  /** http:// proxy URL for the default transport. */
  proxy?: string;
  logger?: Logger;
  /** Milliseconds since the epoch. Default Date.now. */
  clock?: () => number;
  transport?: Transport;
  /** Asks for encrypted success bodies (docs/protocol.md 5); needs the config's api_secret. */
  encKey?: string;
  /** Largest clock offset (s) adopted from the first verified answer; further off it is refused as stale. Default 600. */
  maxClockOffsetSeconds?: number;
  /** Where offline license checks keep the latest time seen (docs/protocol.md 12.5). Default: see defaultStateFile. */
  stateFile?: string;
  /**
   * Where activationRequest keeps the nonce of this machine's latest activation request. Default: the
   * state file's path with `.request.json` instead of `.json`.
   */
  requestFile?: string;
}

export interface AppInfo {
  name: string;
  version: string;
  hwidLock: boolean;
  session: string;
}
/** entitlements: the key's codes, sorted (docs/protocol.md 12.3). */
export interface UserInfo {
  username: string;
  level: number;
  expiresAt: Date | null;
  message: string;
  entitlements: string[];
}
export interface LicenseInfo {
  level: number;
  expiresAt: Date | null;
  message: string;
  entitlements: string[];
}
/** A trial key created for this device and activated at once (docs/protocol.md 12.4); `key` is shown this once. */
export interface TrialInfo extends LicenseInfo {
  key: string;
}
export interface InitOptions {
  binaryHash?: string;
  binaryToken?: string;
  binaryTokenHash?: string;
}

/** What the SDK repeats to re-authenticate a heartbeat on its own. */
export type Activation =
  { kind: 'login'; username: string; password: string; hwid: string } | { kind: 'license'; key: string; hwid: string };

const WINDOW_S = 300;
const CLIENT = '/api/client/';
/** What a reverse proxy answers, unsigned, when the service behind it is down or slow. */
const GATEWAY = new Set([502, 503, 504]);

/** The sorted codes of an answer (absent: none); anything but a list of strings is malformed. */
function entitlementsOf(r: Record<string, unknown>): string[] {
  const v = r.entitlements;
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((e) => typeof e === 'string'))
    throw verificationError('malformed', 'entitlements is not a list of codes');
  return [...new Set(v as string[])].sort();
}

function nonce(): string {
  return randomBytes(18).toString('base64url');
}

function toDate(v: unknown): Date | null {
  if (typeof v !== 'string') return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
}

export class Client {
  readonly config: KeywardenConfig;
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly log: Logger;
  readonly clock: () => number;
  private readonly transport: Transport;
  private readonly keys: PinnedKeys;
  private readonly encKey: string | undefined;
  private readonly maxOffsetS: number;
  /** The realtime channel is used only with the default transport (a custom one, or a proxy, keeps every call its own). */
  private readonly channelCapable: boolean;
  /** Server time minus local time (ms), adopted from the first verified answer. */
  private offsetMs: number | undefined;
  private sessionToken: string | undefined;
  /**
   * The worker that owns this session, as the last answer named it (X-Keywarden-Route): sent back on
   * every call so a balancer that routes on it reaches that worker directly. Not trusted for anything else.
   * Dropped after a connection error, a timeout or a 502/503/504 (signed or not): the worker it names
   * may be gone, and without it the balancer sends the next call to any live one, whose answer names
   * the session's new owner.
   */
  private route: string | undefined;
  private initOptions: InitOptions = {};
  /** The last successful activation, repeated by a heartbeat's re-authentication. */
  lastActivation: Activation | undefined;
  /** @internal The grace period (docs/protocol.md 12.6), shared with the heartbeats. */
  readonly grace = new Grace();
  /** The license's (or end user's) expires_at from the last verified activation answer (unix ms). */
  private expiryMs: number | undefined;
  private ents: string[] = [];
  private readonly stateFileOption: string | undefined;
  private readonly requestFileOption: string | undefined;
  private clockRecord: ClockRecord | undefined;

  static fromConfig(config: KeywardenConfig | string, options: ClientOptions = {}): Client {
    return new Client(typeof config === 'string' ? loadConfigFile(config) : parseConfig(config), options);
  }

  constructor(config: KeywardenConfig, o: ClientOptions = {}) {
    this.config = config;
    this.baseUrl = (o.baseUrl ?? config.base_url).replace(/\/+$/, '');
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.retries = o.retries ?? 2;
    this.log = o.logger ?? {};
    this.clock = o.clock ?? Date.now;
    this.transport = o.transport ?? defaultTransport(o.proxy ? { proxy: o.proxy } : {});
    this.channelCapable = o.transport === undefined && o.proxy === undefined;
    this.maxOffsetS = o.maxClockOffsetSeconds ?? 600;
    this.encKey = o.encKey;
    if (this.encKey && !config.api_secret)
      throw new TypeError('encKey needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)');
    this.keys = pinKeys(config.response_keys);
    this.stateFileOption = o.stateFile;
    this.requestFileOption = o.requestFile;
  }

  /** The session from init, if any. */
  get session(): string | undefined {
    return this.sessionToken;
  }

  /** Server clock offset in ms once learned (server minus local). */
  get clockOffsetMs(): number | undefined {
    return this.offsetMs;
  }

  /** Local clock corrected by the learned offset. */
  serverNow(): number {
    return this.clock() + (this.offsetMs ?? 0);
  }

  /** Salted machine id for this application. */
  machineHwid(): string {
    return machineHwid(this.config.api_key);
  }

  async init(o: InitOptions = {}): Promise<AppInfo> {
    this.initOptions = o;
    const body: Record<string, unknown> = { api_key: this.config.api_key, version: this.config.version ?? '1.0' };
    if (this.encKey) body.enc_key = this.encKey;
    if (o.binaryHash) body.binary_hash = o.binaryHash;
    if (o.binaryToken !== undefined) {
      body.binary_token = o.binaryToken;
      if (o.binaryTokenHash !== undefined) body.binary_token_hash = o.binaryTokenHash;
    }
    this.route = undefined; // a new session lives wherever init lands
    const r = await this.call('init', body);
    const app = (r.app ?? {}) as Record<string, unknown>;
    if (typeof r.session !== 'string' || typeof app.name !== 'string')
      throw verificationError('malformed', 'init answer lacks session or app');
    this.sessionToken = r.session;
    return { name: app.name, version: String(app.version ?? ''), hwidLock: app.hwid_lock === true, session: r.session };
  }

  /** Registers, then logs in at once and ignores that login's failure (as reference clients do since 1.1). */
  async register(a: { username: string; password: string; license: string; hwid?: string }): Promise<UserInfo> {
    const hwid = a.hwid ?? this.machineHwid();
    const r = await this.call('register', {
      session: this.requireSession(),
      username: a.username,
      password: a.password,
      license: a.license,
      hwid,
    });
    const user = this.user(r);
    this.activated(r);
    try {
      await this.login({ username: a.username, password: a.password, hwid });
    } catch (err) {
      this.log.warn?.('keywarden.register.login_failed', { error: (err as Error).message });
    }
    this.lastActivation = { kind: 'login', username: a.username, password: a.password, hwid };
    return user;
  }

  async login(a: { username: string; password: string; hwid?: string }): Promise<UserInfo> {
    const hwid = a.hwid ?? this.machineHwid();
    const r = await this.call('login', {
      session: this.requireSession(),
      username: a.username,
      password: a.password,
      hwid,
    });
    const user = this.user(r);
    this.activated(r);
    this.lastActivation = { kind: 'login', username: a.username, password: a.password, hwid };
    return user;
  }

  async activateLicense(key: string, hwid?: string): Promise<LicenseInfo> {
    const h = hwid ?? this.machineHwid();
    const r = await this.call('license', { session: this.requireSession(), license: key, hwid: h });
    if (typeof r.level !== 'number') throw verificationError('malformed', 'license answer lacks level');
    const entitlements = this.activated(r);
    this.lastActivation = { kind: 'license', key, hwid: h };
    return { level: r.level, expiresAt: toDate(r.expires_at), message: String(r.message ?? ''), entitlements };
  }

  /**
   * Creates this device's trial key and activates it (POST /api/client/trial). Once per device and
   * application: again answers `trial_used`; `trial_disabled` when the application offers none. The
   * key is remembered for re-authentication.
   */
  async trial(hwid?: string): Promise<TrialInfo> {
    const h = hwid ?? this.machineHwid();
    const r = await this.call('trial', { session: this.requireSession(), hwid: h });
    if (typeof r.key !== 'string' || r.key === '' || !Number.isInteger(r.level))
      throw verificationError('malformed', 'trial answer lacks key or level');
    const entitlements = this.activated(r);
    this.lastActivation = { kind: 'license', key: r.key, hwid: h };
    const expires = parseUtcMs(r.expires_at);
    return {
      key: r.key,
      level: r.level as number,
      expiresAt: expires === undefined ? null : new Date(expires),
      message: String(r.message ?? ''),
      entitlements,
    };
  }

  /** The codes of the last verified license, login, register or trial answer, or of the last offline file loaded (sorted). */
  get entitlements(): string[] {
    return [...this.ents];
  }

  hasEntitlement(code: string): boolean {
    return this.ents.includes(code);
  }

  /**
   * Until when the license stays valid while the service cannot be reached, from the latest verified
   * answer; null when it grants none or a verified refusal ended it (docs/protocol.md 12.6).
   */
  get graceUntil(): Date | null {
    const until = this.grace.until;
    return until === undefined ? null : new Date(until);
  }

  /** True while the (server-corrected) clock is before graceUntil. */
  graceActive(): boolean {
    return this.grace.active(this.serverNow());
  }

  /**
   * An offline license file for this machine (POST /api/client/offline), after a successful
   * activation on this session. Save it; loadOffline checks it without the service.
   */
  async offlineFile(hwid?: string): Promise<string> {
    const r = await this.call('offline', { session: this.requireSession(), hwid: hwid ?? this.machineHwid() });
    if (typeof r.license_file !== 'string' || !r.license_file.startsWith('kwlic1.'))
      throw verificationError('malformed', 'offline answer lacks license_file');
    return r.license_file;
  }

  /** Where loadOffline keeps the latest time seen (option stateFile). */
  get stateFile(): string {
    return this.record().file;
  }

  /**
   * Checks an offline license file without the service (docs/protocol.md 12.5; the order of the checks is in
   * offline.ts). Throws `offline_invalid` with an OfflineReason. Every check records the clock in the
   * state file. On success `entitlements` are the file's. Throws TypeError when the config has no app_id.
   */
  loadOffline(file: string, hwid?: string): OfflineLicense {
    if (!this.config.app_id)
      throw new TypeError('keywarden config: app_id missing (offline license files are checked against it)');
    const record = this.record();
    const now = this.clock();
    let lic: OfflineLicense;
    try {
      lic = verifyLicenseFile(file, this.keys, this.config.app_id, hwid ?? this.machineHwid(), now, record.lastSeen());
    } catch (err) {
      this.log.warn?.('keywarden.offline.refused', { error: (err as Error).message });
      throw err;
    } finally {
      record.record(now);
    }
    this.ents = [...lic.entitlements];
    return lic;
  }

  /** Where activationRequest keeps its nonce (option requestFile). */
  get requestFile(): string {
    return this.requestFileOption ?? this.stateFile.replace(/\.json$/, '') + '.request.json';
  }

  private appId(): string {
    if (!this.config.app_id)
      throw new TypeError('keywarden config: app_id missing (offline files and pools are checked against it)');
    return this.config.app_id;
  }

  /**
   * A `kwreq1` activation request for `key` on this machine, written with no network. Carry it to a
   * connected machine (dashboard or customer portal); pass its answer to completeActivation. A new
   * request replaces the kept nonce: answers to older ones are refused.
   */
  activationRequest(key: string, opts: { hwid?: string; components?: Record<string, string> } = {}): string {
    const hwid = opts.hwid ?? this.machineHwid();
    return new RequestStore(this.requestFile).newRequest(this.appId(), key, hwid, this.clock(), opts.components);
  }

  /**
   * Checks the answer to this machine's latest activation request: every check of loadOffline, then
   * its request_nonce (`offline_invalid` / `wrong_request` for an answer to an older request, or when
   * no request is kept here). Save the answer; later starts check it with loadOffline.
   */
  completeActivation(response: string, hwid?: string): OfflineLicense {
    const lic = this.loadOffline(response, hwid);
    try {
      checkRequestNonce(response, new RequestStore(this.requestFile).nonce());
    } catch (err) {
      this.ents = [];
      this.log.warn?.('keywarden.offline.refused', { error: (err as Error).message });
      throw err;
    }
    return lic;
  }

  /**
   * Leases a floating seat from a relay on the local network (instead of the service) and keeps it
   * renewed until `release()`. Believed only with a pool that verifies under the pinned keys and names
   * this application (else `offline_invalid`); every seat taken: `session_limit`. `entitlements`
   * become the pool's.
   */
  async leaseSeat(
    relayUrl: string,
    opts: { hwid?: string; onLost?: (err: KeywardenError) => void } = {},
  ): Promise<SeatLease> {
    const lease = await SeatLease.take(relayUrl, opts.hwid ?? this.machineHwid(), {
      keys: this.keys,
      appId: this.appId(),
      transport: this.transport,
      timeoutMs: this.timeoutMs,
      clock: this.clock,
      log: (e, f) => this.log.warn?.(e, f),
      ...(opts.onLost ? { onLost: opts.onLost } : {}),
    });
    this.ents = [...lease.pool.entitlements];
    return lease;
  }

  private record(): ClockRecord {
    this.clockRecord ??= new ClockRecord(this.stateFileOption ?? defaultStateFile(this.config.api_key), (e, f) =>
      this.log.warn?.(e, f),
    );
    return this.clockRecord;
  }

  /** Books a verified activation answer: its entitlements, its grace and its expiry. */
  private activated(r: Record<string, unknown>): string[] {
    const entitlements = entitlementsOf(r);
    this.ents = entitlements;
    this.grace.note(r);
    const user = r.user as Record<string, unknown> | undefined;
    this.expiryMs = parseUtcMs(r.expires_at ?? user?.expires_at);
    return [...entitlements];
  }

  /**
   * When the license (an end user's: the user) expires, from the last verified license, login, register or
   * trial answer; null for a lifetime key or before any activation. A running heartbeat reports `expired`
   * once the server ends its session at that time (docs/protocol.md 12.8).
   */
  get expiresAt(): Date | null {
    return this.expiryMs === undefined ? null : new Date(this.expiryMs);
  }

  /** @internal The known expiry was extended on the server (a beat was accepted after it): forget it. */
  forgetExpiry(): void {
    this.expiryMs = undefined;
  }

  /** @internal A verified refusal (also one that came over the realtime channel) ends the grace at once. */
  noteRefusal(status: number | undefined): void {
    if (isRefusal(status) && this.grace.until !== undefined) {
      this.log.info?.('keywarden.grace.ended', { status });
      this.grace.end();
    }
  }

  /**
   * Opens a heartbeat session and beats until stopped or killed. systemId defaults to the
   * machine hwid, codeHash to selfHash().
   */
  async startHeartbeat(systemId?: string, codeHash?: string, options: HeartbeatOptions = {}): Promise<Heartbeat> {
    const sys = systemId ?? this.machineHwid();
    let code = codeHash;
    if (code === undefined) {
      try {
        code = selfHash();
      } catch {
        code = selfHash(process.execPath);
      }
    }
    const link =
      options.channel !== 'off' && this.channelCapable
        ? new ChannelLink(this.channelContext(), this.requireSession())
        : undefined;
    let started;
    try {
      started = await this.openHeartbeat(sys, link);
    } catch (err) {
      link?.close();
      throw err;
    }
    const hb = new Heartbeat(this, sys, code, started, options, link);
    hb.begin();
    return hb;
  }

  /** heartbeat/start (on the channel when `link` opens, else REST) with the proof checked before the token is trusted. */
  async openHeartbeat(
    systemId: string,
    link?: ChannelLink,
  ): Promise<{ session: string; token: string; beatInterval: number }> {
    const session = this.requireSession();
    let r: Record<string, unknown> | undefined;
    if (link && (await link.rebind(session))) {
      try {
        r = await link.call('heartbeat/start', { system_id: systemId });
      } catch (err) {
        if (!(err instanceof KeywardenError && err.notSent)) throw err;
      }
    }
    r ??= await this.call('heartbeat/start', { session, system_id: systemId });
    if (typeof r.token !== 'string' || typeof r.beat_interval !== 'number')
      throw verificationError('malformed', 'heartbeat/start answer lacks token');
    if (!proofEquals(r.proof, startProof(session, systemId, r.token)))
      throw verificationError('bad_proof', 'heartbeat/start proof does not verify');
    this.grace.note(r);
    return { session, token: r.token, beatInterval: r.beat_interval };
  }

  /** init + the remembered activation, for a heartbeat whose state was lost. */
  async reauthenticate(): Promise<void> {
    const a = this.lastActivation;
    if (!a)
      throw new KeywardenError(
        'session_expired',
        'nothing to re-authenticate with: no login or license succeeded on this client',
      );
    await this.init(this.initOptions);
    if (a.kind === 'login') await this.login(a);
    else await this.activateLicense(a.key, a.hwid);
  }

  /** @internal What the realtime channel needs of this client. */
  channelContext(): ChannelContext {
    return {
      baseUrl: this.baseUrl,
      version: this.config.version ?? '1.0',
      apiSecret: this.config.api_secret,
      timeoutMs: this.timeoutMs,
      openTimeoutMs: Math.min(this.timeoutMs, 5000),
      keys: this.keys,
      route: () => this.route,
      serverNow: () => this.serverNow(),
      log: this.log,
    };
  }

  /**
   * Asks for the newest release above `version` this activated key may install on `platform`/`arch`
   * (channels stable < rc < beta < alpha < dev: a channel is offered itself and everything more
   * stable). Resolves null, or the offer whose every artifact's signature verified under the pinned
   * keys (else an UpdateError). Throws TypeError when the config has no app_id.
   */
  async checkUpdate(
    version: string,
    o: { channel?: string; platform?: string; arch?: string } = {},
  ): Promise<UpdateOffer | null> {
    const appId = this.requireAppId();
    const r = await this.call('releases/upgrade', {
      session: this.requireSession(),
      version,
      channel: o.channel ?? 'stable',
      platform: o.platform ?? 'any',
      arch: o.arch ?? 'any',
    });
    if (r.upgrade === null || r.upgrade === undefined) return null;
    if (typeof r.upgrade !== 'object') throw verificationError('malformed', 'upgrade answer is not an object');
    try {
      return parseOffer(r.upgrade as Record<string, unknown>, appId, this.keys, toDate);
    } catch (err) {
      if (err instanceof TypeError) throw verificationError('malformed', err.message);
      throw err;
    }
  }

  /**
   * Downloads `artifact` to `targetPath`: streamed into a temporary file in the same folder
   * (`progress(received, total)` after each chunk), checked for size, SHA-512 and signature, then
   * renamed over the target. Any failure removes the temporary file, leaves the target untouched and
   * throws an UpdateError. `timeoutMs` bounds the connect and each pause of the stream, not the whole
   * download; the download connects directly (the `proxy` and `transport` options are not used).
   * Resolves with the target's absolute path.
   */
  downloadUpdate(artifact: Artifact, targetPath: string, progress?: ProgressCallback): Promise<string> {
    return downloadArtifact(this.keys, artifact, targetPath, progress, this.timeoutMs);
  }

  private requireAppId(): string {
    if (!this.config.app_id)
      throw new TypeError('keywarden config: app_id missing (release artifacts are signed for it)');
    return this.config.app_id;
  }

  private requireSession(): string {
    if (!this.sessionToken) throw new KeywardenError('session_expired', 'call init() first');
    return this.sessionToken;
  }

  private user(r: Record<string, unknown>): UserInfo {
    const u = r.user as Record<string, unknown> | undefined;
    if (!u || typeof u.username !== 'string' || typeof u.level !== 'number')
      throw verificationError('malformed', 'answer lacks user');
    return {
      username: u.username,
      level: u.level,
      expiresAt: toDate(u.expires_at),
      message: String(r.message ?? ''),
      entitlements: entitlementsOf(r),
    };
  }

  /**
   * One verified client call. Sends again (fresh nonce) only when the request certainly never
   * reached the server, or once after the server refused our request signature while our clock
   * was off (learned from that same signed answer).
   */
  async call(endpoint: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    let attempt = 0;
    let clockRetried = false;
    for (;;) {
      try {
        return await this.once(endpoint, body);
      } catch (err) {
        if (err instanceof KeywardenError && err.notSent && attempt < this.retries) {
          attempt++;
          this.log.debug?.('keywarden.call.retry', { endpoint, attempt, error: err.message });
          await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
          continue;
        }
        if (
          err instanceof KeywardenError &&
          err.code === 'clock_skew' &&
          !clockRetried &&
          (err as ClockAware).offsetLearned
        ) {
          clockRetried = true;
          continue;
        }
        throw err;
      }
    }
  }

  private async once(endpoint: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const path = CLIENT + endpoint;
    const initIv = this.encKey ? randomBytes(16).toString('base64url') : undefined;
    const raw = Buffer.from(JSON.stringify(initIv ? { ...body, init_iv: initIv } : body), 'utf8');
    const n = nonce();
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-nonce': n,
    };
    if (this.route) headers['x-keywarden-route'] = this.route;
    if (this.config.api_secret) {
      const ts = String(Math.floor(this.serverNow() / 1000));
      headers['x-timestamp'] = ts;
      headers['x-signature'] = requestSignature(this.config.api_secret, canonicalRequest('POST', path, ts, n, raw));
    }
    let res;
    try {
      res = await this.transport({
        method: 'POST',
        url: this.baseUrl + path,
        headers,
        body: raw,
        timeoutMs: this.timeoutMs,
      });
    } catch (err) {
      this.route = undefined;
      const t = err instanceof TransportError ? err : undefined;
      const kind = t?.kind ?? 'network';
      throw new KeywardenError(kind, `${kind} on ${path}: ${(err as Error)?.message ?? String(err)}`, {
        notSent: t ? !t.sent : false,
        cause: err,
      });
    }
    // Signed or not (a balancer's own answer is not), the worker the route names may be gone. Dropping
    // a hint is all a forged one could achieve: the next call is merely forwarded once.
    if (GATEWAY.has(res.status)) this.route = undefined;
    if (
      GATEWAY.has(res.status) &&
      !res.headers['x-response-kid'] &&
      !res.headers['x-response-timestamp'] &&
      !res.headers['x-response-signature']
    ) {
      // A proxy in front saying the service is unreachable: believed for nothing, but not an attack
      // either (whoever could forge it could as well cut the connection).
      throw new KeywardenError('server', `server: ${res.status} from a gateway (unsigned) on ${path}`, {
        status: res.status,
      });
    }
    const hadOffset = this.offsetMs !== undefined;
    this.verify(path, res.status, res.headers, res.body, n);
    const route = res.headers['x-keywarden-route'];
    if (route && !GATEWAY.has(res.status)) this.route = route;
    let parsed: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(Buffer.from(res.body).toString('utf8'));
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
      parsed = v as Record<string, unknown>;
    } catch {
      throw verificationError('malformed', `answer of ${path} (${res.status}) is not a JSON object`);
    }
    if (res.status !== 200) {
      this.noteRefusal(res.status);
      const e = errorFromAnswer(res.status, parsed.detail, res.headers['retry-after']);
      // Our timestamp was refused and this signed answer just taught us the server's clock: worth one retry.
      if (e.code === 'clock_skew' && !hadOffset && Math.abs(this.offsetMs ?? 0) > 60_000)
        (e as ClockAware).offsetLearned = true;
      throw e;
    }
    if (typeof parsed.enc === 'string' && initIv && this.encKey) {
      try {
        const v: unknown = JSON.parse(
          decryptResponse(parsed.enc, this.encKey, this.config.api_secret!, initIv).toString('utf8'),
        );
        if (v === null || typeof v !== 'object') throw new Error('not an object');
        parsed = v as Record<string, unknown>;
      } catch {
        throw verificationError('malformed', `encrypted answer of ${path} does not decrypt`);
      }
    }
    if (parsed.success !== true) throw verificationError('malformed', `answer of ${path} lacks success: true`);
    return parsed;
  }

  private verify(path: string, status: number, headers: Record<string, string>, body: Uint8Array, n: string): void {
    // Before the offset is known a larger distance is allowed: the answer is bound to this
    // request's fresh nonce, so it cannot be an old one replayed. Afterwards: 300 s around server time.
    const limit = this.offsetMs === undefined ? this.maxOffsetS : WINDOW_S;
    const serverMs = verifyResponse(
      this.keys,
      { method: 'POST', path, status, headers, body, nonce: n },
      this.serverNow(),
      limit,
    );
    if (this.offsetMs === undefined) {
      this.offsetMs = serverMs - this.clock();
      if (Math.abs(this.offsetMs) > 5000) this.log.info?.('keywarden.clock.offset', { offsetMs: this.offsetMs });
    }
  }
}

interface ClockAware {
  offsetLearned?: boolean;
}
