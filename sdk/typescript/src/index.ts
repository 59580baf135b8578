// Keywarden TypeScript client SDK. Depends on node:crypto only.
//
// Every response is verified before anything in it is believed (PROTOCOL 4): it must carry a
// signature from a pinned key id, over this request's own nonce, with a fresh timestamp.
// Heartbeat tokens are trusted only after their proof verifies too (PROTOCOL 6).
import { EventEmitter } from 'node:events';
import {
  createDecipheriv, createHash, createHmac, createPublicKey, randomBytes, timingSafeEqual, verify, type KeyObject,
} from 'node:crypto';

export interface ClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Signs every request (PROTOCOL 3) when the application requires signatures. */
  apiSecret?: string;
  version?: string;
  /** Pinned response-signing keys: kid -> base64 Ed25519 public key. Responses from other kids are refused. */
  publicKeys: Record<string, string>;
  /** Asks for encrypted responses (PROTOCOL 5). */
  encKey?: string;
  /** Largest accepted distance between a response timestamp and now, seconds. */
  maxSkewSeconds?: number;
  fetch?: typeof fetch;
  now?: () => number;
}

/** A failure the server answered: status and detail exactly as sent. */
export class KeywardenError extends Error {
  constructor(readonly status: number, readonly detail: unknown) {
    super(`${status} ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`);
    this.name = 'KeywardenError';
  }
}

export type VerificationFailure = 'unsigned' | 'unknown_kid' | 'bad_signature_encoding' | 'bad_signature' | 'stale' | 'proof' | 'malformed';

/** A response that must not be believed: forged, replayed, unsigned or stale. */
export class ResponseVerificationError extends Error {
  constructor(readonly reason: VerificationFailure, message: string) {
    super(message);
    this.name = 'ResponseVerificationError';
  }
}

export interface User {
  username: string;
  level: number;
  expires_at: string | null;
}

const sha256Hex = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');

export class KeywardenClient {
  session: string | undefined;
  private readonly keys = new Map<string, KeyObject>();
  private readonly fetchFn: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly o: ClientOptions) {
    for (const [kid, b64] of Object.entries(o.publicKeys)) {
      const raw = Buffer.from(b64, 'base64');
      if (raw.length !== 32) throw new Error(`public key ${kid} is not 32 bytes`);
      this.keys.set(kid, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' }));
    }
    this.fetchFn = o.fetch ?? fetch;
    this.now = o.now ?? Date.now;
  }

  /** Opens a session. */
  async init(extra: { binaryHash?: string; binaryToken?: string; binaryTokenHash?: string } = {}) {
    const body: Record<string, unknown> = { api_key: this.o.apiKey, version: this.o.version ?? '1.0' };
    if (this.o.encKey) body.enc_key = this.o.encKey;
    if (extra.binaryHash) body.binary_hash = extra.binaryHash;
    if (extra.binaryToken !== undefined) {
      body.binary_token = extra.binaryToken;
      body.binary_token_hash = extra.binaryTokenHash;
    }
    const r = await this.call<{ session: string; app: { name: string; version: string; hwid_lock: boolean } }>('/api/client/init', body);
    this.session = r.session;
    return r;
  }

  /** Registers and, as the reference clients do since 1.1, logs in at once, ignoring that login's failure. */
  async register(a: { username: string; password: string; license: string; hwid: string; screenshot?: string }): Promise<{ success: true; message: string; user: User }> {
    const r = await this.call<{ message: string; user: User }>('/api/client/register', { session: this.requireSession(), ...a });
    try {
      await this.login({ username: a.username, password: a.password, hwid: a.hwid });
    } catch {
      // ignored by design (SPEC "Versioning" 2)
    }
    return r;
  }

  login(a: { username: string; password: string; hwid: string; screenshot?: string }): Promise<{ success: true; message: string; user: User }> {
    return this.call('/api/client/login', { session: this.requireSession(), ...a });
  }

  license(a: { license: string; hwid: string; screenshot?: string }): Promise<{ success: true; message: string; level: number; expires_at: string | null }> {
    return this.call('/api/client/license', { session: this.requireSession(), ...a });
  }

  /** Starts a heartbeat session and beats until stopped or killed (see Heartbeat). */
  async startHeartbeat(o: HeartbeatOptions): Promise<Heartbeat> {
    const session = this.requireSession();
    const r = await this.call<{ token: string; beat_interval: number; proof: string }>('/api/client/heartbeat/start', { session, system_id: o.systemId });
    const expected = createHmac('sha256', session).update(`kwhs1\n${o.systemId}\n${r.token}`).digest();
    if (!proofMatches(r.proof, expected)) throw new ResponseVerificationError('proof', 'heartbeat start proof does not verify');
    const hb = new Heartbeat(this, session, r.token, r.beat_interval, o);
    hb.schedule();
    return hb;
  }

  private requireSession(): string {
    if (!this.session) throw new Error('call init() first');
    return this.session;
  }

  /** One signed, verified call; throws KeywardenError for failures the server answered. */
  async call<T>(path: string, body: Record<string, unknown>): Promise<T & { success: true }> {
    const initIv = this.o.encKey ? randomBytes(12).toString('base64url') : undefined;
    if (initIv) body = { ...body, init_iv: initIv };
    const raw = Buffer.from(JSON.stringify(body));
    const nonce = randomBytes(16).toString('base64url');
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-nonce': nonce };
    if (this.o.apiSecret) {
      const ts = String(Math.floor(this.now() / 1000));
      headers['x-timestamp'] = ts;
      headers['x-signature'] = createHmac('sha256', this.o.apiSecret).update(`POST\n${path}\n${ts}\n${nonce}\n${sha256Hex(raw)}`).digest('hex');
    }
    const res = await this.fetchFn(this.o.baseUrl.replace(/\/$/, '') + path, { method: 'POST', headers, body: raw });
    const bytes = Buffer.from(await res.arrayBuffer());
    this.verifyResponse(path, res.status, res.headers, bytes, nonce);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new ResponseVerificationError('malformed', 'response is not JSON');
    }
    if (res.status !== 200) throw new KeywardenError(res.status, parsed.detail);
    if (typeof parsed.enc === 'string' && this.o.encKey && initIv) parsed = this.decrypt(parsed.enc, initIv);
    return parsed as T & { success: true };
  }

  private verifyResponse(path: string, status: number, headers: Headers, body: Buffer, nonce: string): void {
    const kid = headers.get('x-response-kid');
    const ts = headers.get('x-response-timestamp');
    const sig = headers.get('x-response-signature');
    if (!kid || !ts || !sig) throw new ResponseVerificationError('unsigned', `unsigned response (${status}) on ${path}`);
    const key = this.keys.get(kid);
    if (!key) throw new ResponseVerificationError('unknown_kid', `response signed with unknown key id ${kid}`);
    if (!/^[A-Za-z0-9+/]{86}==$/.test(sig)) throw new ResponseVerificationError('bad_signature_encoding', 'response signature is not base64 of 64 bytes');
    if (!/^\d{1,12}$/.test(ts) || Math.abs(Number(ts) - this.now() / 1000) > (this.o.maxSkewSeconds ?? 300)) {
      throw new ResponseVerificationError('stale', `response timestamp ${ts} is too far from now`);
    }
    // The message includes this request's nonce: a response replayed from another request fails here.
    const message = `kw1\n${kid}\nPOST\n${path}\n${status}\n${ts}\n${nonce}\n${sha256Hex(body)}`;
    if (!verify(null, Buffer.from(message), key, Buffer.from(sig, 'base64'))) {
      throw new ResponseVerificationError('bad_signature', `response signature does not verify on ${path}`);
    }
  }

  /** PROTOCOL 5: key = sha256(enc_key + "-" + api_secret), iv = sha256(init_iv)[0..16]. */
  private decrypt(enc: string, initIv: string): Record<string, unknown> {
    if (!this.o.apiSecret) throw new Error('decrypting responses needs apiSecret');
    const key = createHash('sha256').update(`${this.o.encKey}-${this.o.apiSecret}`).digest();
    const iv = createHash('sha256').update(initIv).digest().subarray(0, 16);
    const d = createDecipheriv('aes-256-cbc', key, iv);
    try {
      return JSON.parse(Buffer.concat([d.update(Buffer.from(enc, 'base64')), d.final()]).toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new ResponseVerificationError('malformed', 'encrypted response does not decrypt');
    }
  }
}

function proofMatches(given: string, expected: Buffer): boolean {
  const g = Buffer.from(given ?? '', 'base64');
  return g.length === expected.length && timingSafeEqual(g, expected);
}

export interface HeartbeatOptions {
  systemId: string;
  codeHash: string;
  codeSize?: number;
  /** Asked before each beat. */
  debuggerDetected?: () => boolean;
  /** Beat period; defaults to the server's beat_interval. */
  intervalMs?: number;
}

/**
 * A running heartbeat: emits 'beat' ({beatCount, beatIndex}) after each verified beat, 'error'
 * (and stops) when a beat fails, and 'stopped' once stopped. beat_index only grows; the new
 * token is used only after the response signature and the proof have verified.
 */
export class Heartbeat extends EventEmitter {
  private index = 0;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly client: KeywardenClient, private readonly session: string, private token: string,
    readonly beatInterval: number, private readonly o: HeartbeatOptions) {
    super();
  }

  schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.inflight = this.beat().then(() => this.schedule(), (err: unknown) => {
        this.stopped = true;
        this.emit('error', err);
      });
    }, this.o.intervalMs ?? this.beatInterval * 1000);
  }

  /** One beat now (also used by the timer). */
  async beat(): Promise<void> {
    const index = this.index + 1;
    const r = await this.client.call<{ new_token: string; beat_count: number; proof: string }>('/api/client/heartbeat', {
      session: this.session, token: this.token, system_id: this.o.systemId, beat_index: index, code_hash: this.o.codeHash,
      ...(this.o.codeSize !== undefined ? { code_size: this.o.codeSize } : {}),
      ...(this.o.debuggerDetected ? { debugger_detected: this.o.debuggerDetected() } : {}),
    });
    const expected = createHmac('sha256', this.token).update(`kwhb1\n${this.session}\n${index}\n${r.new_token}\n${r.beat_count}`).digest();
    if (!proofMatches(r.proof, expected)) throw new ResponseVerificationError('proof', 'heartbeat proof does not verify');
    this.token = r.new_token;
    this.index = index;
    this.emit('beat', { beatCount: r.beat_count, beatIndex: index });
  }

  /** Stops the loop, waits for a beat in flight, and closes the session on the server. */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    const wasRunning = !this.stopped;
    this.stopped = true;
    await this.inflight?.catch(() => undefined);
    if (wasRunning) await this.client.call('/api/client/heartbeat/stop', { session: this.session, token: this.token });
    this.emit('stopped');
  }
}
