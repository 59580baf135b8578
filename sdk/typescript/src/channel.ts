// The realtime channel (the server's docs/protocol.md, "Realtime channel"): heartbeat calls over one
// WebSocket and pushes (revoked, update_required, notice). Nothing is believed unverified: the
// hello must be signed by a pinned key over THIS client's session and fresh X25519 key, every
// later frame must carry the MAC of this connection and the next sequence number. A frame that
// fails is refused: the connection is dropped and the message never acted upon.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  canonicalRequest,
  channelKeys,
  channelTranscript,
  decodeSignature,
  ed25519Verify,
  openFrame,
  requestSignature,
  sealFrame,
} from './crypto.js';
import { KeywardenError, errorFromAnswer, verificationError, type VerificationReason } from './errors.js';
import type { PinnedKeys } from './verify.js';
import { verifyResponse } from './verify.js';
import { openWebSocket, type WebSocketClient } from './websocket.js';

export const CHANNEL_PATH = '/api/client/ws';
const WINDOW_S = 300;

/** What a channel needs from its Client. */
export interface ChannelContext {
  baseUrl: string;
  version: string;
  apiSecret: string | undefined;
  /** Per call on the channel. */
  timeoutMs: number;
  /** For the upgrade and the hello: a server (or proxy) that never answers an upgrade must not delay REST long. */
  openTimeoutMs: number;
  keys: PinnedKeys;
  /** The route the last REST answer named (X-Keywarden-Route), sent on the upgrade. */
  route?: () => string | undefined;
  serverNow(): number;
  log: {
    debug?(msg: string, fields?: Record<string, unknown>): void;
    warn?(msg: string, fields?: Record<string, unknown>): void;
  };
}

export type ChannelPush =
  | { type: 'revoked'; reason: string; detail: string }
  | {
      type: 'update_required';
      message: string;
      latestVersion: string | undefined;
      updateUrl: string | undefined;
      detail: unknown;
    }
  | { type: 'notice'; message: string; at: Date | null };

export interface ChannelClose {
  code: number;
  reason: string;
  /** Set when this client dropped the connection because a frame did not verify. */
  error?: KeywardenError;
}

export type OpenResult =
  | { ok: true; connection: ChannelConnection }
  /** `offered: false`: this server has no channel (404/405): use REST for good. */
  | { ok: false; error: KeywardenError; offered: boolean };

interface Pending {
  resolve: (body: Record<string, unknown>) => void;
  reject: (err: KeywardenError) => void;
  timer: NodeJS.Timeout;
}

/** One verified connection. Events: 'push' (ChannelPush), 'close' (ChannelClose), once. */
export class ChannelConnection extends EventEmitter {
  private outSeq = 0;
  private inSeq = 0;
  private readonly pending = new Map<number, Pending>();
  private closedWith: ChannelClose | undefined;
  /** Frames that came before start(): a push may follow the hello at once. */
  private backlog: [Buffer, boolean][] | undefined;
  readonly beatInterval: number;

  private constructor(
    private readonly ctx: ChannelContext,
    private readonly ws: WebSocketClient,
    private readonly keys: { s2c: Buffer; c2s: Buffer },
    hello: { beat_interval: number },
    backlog: [Buffer, boolean][],
  ) {
    super();
    this.beatInterval = hello.beat_interval;
    this.backlog = backlog;
    ws.removeAllListeners('message');
    ws.on('message', (data: Buffer, binary: boolean) => {
      if (this.backlog) this.backlog.push([data, binary]);
      else this.receive(data, binary);
    });
    ws.once('close', (code: number, reason: string) => this.finish({ code, reason }));
  }

  /** Call once the 'push' and 'close' listeners are in place: frames received so far are judged now, in order. */
  start(): void {
    const queued = this.backlog ?? [];
    this.backlog = undefined;
    for (const [data, binary] of queued) this.receive(data, binary);
  }

  get open(): boolean {
    return this.closedWith === undefined;
  }

  /** Upgrades, verifies the hello and derives the keys. Never throws. */
  static async open(ctx: ChannelContext, session: string): Promise<OpenResult> {
    const pair = generateKeyPairSync('x25519');
    const clientKey = pair.publicKey.export({ format: 'jwk' }).x!;
    const headers: Record<string, string> = {
      'x-session': session,
      'x-nonce': clientKey,
      'x-client-version': ctx.version,
    };
    const route = ctx.route?.();
    if (route) headers['x-keywarden-route'] = route;
    if (ctx.apiSecret) {
      const ts = String(Math.floor(ctx.serverNow() / 1000));
      headers['x-timestamp'] = ts;
      headers['x-signature'] = requestSignature(
        ctx.apiSecret,
        canonicalRequest('GET', CHANNEL_PATH, ts, clientKey, ''),
      );
    }
    let up;
    try {
      up = await openWebSocket(ctx.baseUrl + CHANNEL_PATH, headers, ctx.openTimeoutMs);
    } catch (err) {
      return {
        ok: false,
        offered: true,
        error: new KeywardenError('network', `channel: ${(err as Error)?.message ?? String(err)}`, {
          notSent: true,
          cause: err,
        }),
      };
    }
    if (up.kind === 'refused') return ChannelConnection.refusal(ctx, clientKey, up);
    const ws = up.socket;
    ws.unref(); // the heartbeat's own timer keeps the program alive, never the channel alone
    const queue: [Buffer, boolean][] = [];
    ws.on('message', (data: Buffer, binary: boolean) => queue.push([data, binary]));
    ws.start();
    try {
      const [hello, binary] = await firstMessage(ws, queue, ctx.openTimeoutMs);
      if (binary) throw verificationError('malformed', 'channel hello is not a text frame');
      const keys = verifyChannelHello(ctx.keys, ctx.serverNow(), session, clientKey, pair.privateKey, hello);
      return { ok: true, connection: new ChannelConnection(ctx, ws, keys, JSON.parse(hello.toString('utf8')), queue) };
    } catch (err) {
      ws.terminate();
      const e =
        err instanceof KeywardenError
          ? err
          : new KeywardenError('network', `channel: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      return { ok: false, offered: true, error: e };
    }
  }

  private static refusal(
    ctx: ChannelContext,
    nonce: string,
    r: { status: number; headers: Record<string, string>; body: Buffer },
  ): OpenResult {
    const absent = r.status === 404 || r.status === 405;
    try {
      verifyResponse(
        ctx.keys,
        { method: 'GET', path: CHANNEL_PATH, status: r.status, headers: r.headers, body: r.body, nonce },
        ctx.serverNow(),
        WINDOW_S,
      );
    } catch (err) {
      // An unsigned answer (a proxy that does not pass WebSockets): nothing in it is believed.
      return { ok: false, offered: !absent, error: err as KeywardenError };
    }
    let detail: unknown;
    try {
      detail = (JSON.parse(r.body.toString('utf8')) as { detail?: unknown }).detail;
    } catch {
      return {
        ok: false,
        offered: !absent,
        error: verificationError('malformed', `channel refusal ${r.status} is not JSON`),
      };
    }
    return { ok: false, offered: !absent, error: errorFromAnswer(r.status, detail, r.headers['retry-after']) };
  }

  /**
   * One heartbeat call. Resolves with the success body; rejects with the server's coded error, or
   * `network` with `notSent: true` when the channel was already down (send it over REST instead).
   */
  call(
    op: 'heartbeat/start' | 'heartbeat' | 'heartbeat/stop',
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (!this.open) return Promise.reject(new KeywardenError('network', 'channel closed', { notSent: true }));
    const { session: _ignored, ...rest } = body;
    const seq = ++this.outSeq;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq);
        reject(new KeywardenError('timeout', `no answer to ${op} on the channel within ${this.ctx.timeoutMs} ms`));
      }, this.ctx.timeoutMs);
      this.pending.set(seq, { resolve, reject, timer });
      this.ws.send(
        sealFrame(this.keys.c2s, Buffer.from(JSON.stringify({ seq, type: 'call', op, body: rest }), 'utf8')),
      );
    });
  }

  close(code = 1000): void {
    this.ws.close(code, 'client closing');
  }

  private refuse(reason: VerificationReason, what: string): void {
    const error = verificationError(reason, what);
    this.ctx.log.warn?.('keywarden.channel.refused', { reason });
    this.finish({ code: 1006, reason: what, error }); // first: the socket's own close must not report it as a plain drop
    this.ws.terminate();
  }

  private receive(frame: Buffer, binary: boolean): void {
    if (!this.open) return;
    const r = readChannelFrame(this.keys.s2c, this.inSeq + 1, frame, binary);
    if ('reason' in r) return this.refuse(r.reason, r.what);
    this.inSeq++;
    const m = r.message;
    switch (m.type) {
      case 'reply': {
        const p = typeof m.re === 'number' ? this.pending.get(m.re) : undefined;
        if (!p) return;
        this.pending.delete(m.re as number);
        clearTimeout(p.timer);
        const body = (m.body ?? {}) as Record<string, unknown>;
        if (m.status === 200) {
          if (body.success !== true)
            return p.reject(verificationError('malformed', 'channel reply lacks success: true'));
          return p.resolve(body);
        }
        return p.reject(
          errorFromAnswer(
            Number(m.status),
            body.detail,
            m.retry_after !== undefined ? String(m.retry_after) : undefined,
          ),
        );
      }
      case 'revoked':
        this.emit('push', {
          type: 'revoked',
          reason: String(m.reason ?? ''),
          detail: String(m.detail ?? ''),
        } satisfies ChannelPush);
        return;
      case 'update_required': {
        const d = (m.detail ?? {}) as Record<string, unknown>;
        this.emit('push', {
          type: 'update_required',
          message: typeof d.message === 'string' ? d.message : 'A new version is required.',
          latestVersion: typeof d.latest_version === 'string' ? d.latest_version : undefined,
          updateUrl: typeof d.update_url === 'string' ? d.update_url : undefined,
          detail: m.detail,
        } satisfies ChannelPush);
        return;
      }
      case 'notice': {
        const at = typeof m.at === 'string' ? new Date(m.at) : null;
        this.emit('push', {
          type: 'notice',
          message: String(m.message ?? ''),
          at: at && !Number.isNaN(at.getTime()) ? at : null,
        } satisfies ChannelPush);
        return;
      }
      default:
        return; // pong, or a message type of a newer server: verified, and harmless to skip
    }
  }

  private finish(c: ChannelClose): void {
    if (this.closedWith) return;
    this.closedWith = c;
    for (const [seq, p] of this.pending) {
      clearTimeout(p.timer);
      // Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
      p.reject(c.error ?? new KeywardenError('network', `channel closed (${c.code}) before the answer to call ${seq}`));
    }
    this.pending.clear();
    this.emit('close', c);
  }
}

/**
 * Verifies the hello as the client whose session and X25519 key made the upgrade, and derives the
 * keys. Order of checks (sdk/vectors/channel.json): malformed, unknown_kid, bad_base64, stale, bad_signature.
 */
export function verifyChannelHello(
  keys: PinnedKeys,
  nowMs: number,
  session: string,
  clientKey: string,
  secret: KeyObject,
  raw: Buffer | string,
): { s2c: Buffer; c2s: Buffer } {
  let h: Record<string, unknown>;
  try {
    h = JSON.parse(raw.toString()) as Record<string, unknown>;
  } catch {
    throw verificationError('malformed', 'channel hello is not JSON');
  }
  if (
    h === null ||
    typeof h !== 'object' ||
    h.type !== 'hello' ||
    typeof h.kid !== 'string' ||
    typeof h.sig !== 'string' ||
    typeof h.ts !== 'number' ||
    typeof h.server_key !== 'string' ||
    typeof h.conn !== 'string' ||
    typeof h.beat_interval !== 'number'
  ) {
    throw verificationError('malformed', 'channel hello lacks fields');
  }
  const key = keys.get(h.kid);
  if (!key) throw verificationError('unknown_kid', `channel hello signed by unpinned key ${h.kid}`);
  const sig = decodeSignature(h.sig);
  if (!sig) throw verificationError('bad_base64', 'channel hello signature is not base64 of 64 bytes');
  if (Math.abs(h.ts * 1000 - nowMs) > WINDOW_S * 1000)
    throw verificationError('stale', `channel hello timestamp ${h.ts} is off`);
  const transcript = channelTranscript({
    kid: h.kid,
    ts: h.ts,
    session,
    clientKey,
    serverKey: h.server_key,
    conn: h.conn,
    beatInterval: h.beat_interval,
  });
  if (!ed25519Verify(key, transcript, sig)) throw verificationError('bad_signature', 'channel hello does not verify');
  try {
    return channelKeys(secret, h.server_key, transcript);
  } catch {
    throw verificationError('malformed', 'channel hello carries an unusable server key');
  }
}

/** One server frame judged: MAC (bad_mac), JSON object (malformed), seq (out_of_order). */
export function readChannelFrame(
  s2c: Uint8Array,
  expectedSeq: number,
  frame: Buffer,
  binary = true,
): { message: Record<string, unknown> } | { reason: VerificationReason; what: string } {
  if (!binary) return { reason: 'malformed', what: 'text frame after the hello' };
  const payload = openFrame(s2c, frame);
  if (!payload) return { reason: 'bad_mac', what: 'channel frame MAC does not verify' };
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(payload.toString('utf8')) as Record<string, unknown>;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new Error('not an object');
  } catch {
    return { reason: 'malformed', what: 'channel frame is not a JSON object' };
  }
  if (m.seq !== expectedSeq)
    return { reason: 'out_of_order', what: `channel frame ${String(m.seq)} where ${expectedSeq} was due` };
  return { message: m };
}

/** Takes the first frame off `queue` (filled by the caller's listener), waiting for it if needed. */
function firstMessage(ws: WebSocketClient, queue: [Buffer, boolean][], timeoutMs: number): Promise<[Buffer, boolean]> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      ws.off('message', check);
      ws.off('close', closed);
    };
    const check = () => {
      const first = queue.shift();
      if (!first) return;
      done();
      resolve(first);
    };
    const closed = (code: number) => {
      done();
      reject(new KeywardenError('network', `channel closed (${code}) before its hello`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new KeywardenError('timeout', `no channel hello within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.on('message', check);
    ws.once('close', closed);
    check();
  });
}

export type LinkEvent =
  | { kind: 'push'; push: ChannelPush }
  | { kind: 'state'; state: 'open' | 'closed'; close?: ChannelClose; error?: KeywardenError };

/** Close codes after which the channel is not reopened for this session. */
const FINAL_CLOSE = new Set([1000, 4001, 4003, 4008]);

/**
 * The heartbeat's channel: opens it, reopens it after a drop (backoff 0.5 s doubling up to 30 s),
 * gives up for good when the server has none, and hands pushes and state changes to one sink.
 */
export class ChannelLink {
  private conn: ChannelConnection | undefined;
  private timer: NodeJS.Timeout | undefined;
  private attempts = 0;
  private off = false;
  private sink: ((e: LinkEvent) => void) | undefined;
  private readonly backlog: LinkEvent[] = [];

  constructor(
    private readonly ctx: ChannelContext,
    private session: string,
  ) {}

  get ready(): boolean {
    return this.conn?.open === true;
  }

  get enabled(): boolean {
    return !this.off;
  }

  /** Where pushes and state changes go; those that came before follow on the next turn (after the caller's listeners). */
  attach(sink: (e: LinkEvent) => void): void {
    setImmediate(() => {
      this.sink = sink;
      for (const e of this.backlog.splice(0)) sink(e);
    });
  }

  /** One attempt now; true when the channel is open. */
  async connect(): Promise<boolean> {
    if (this.off) return false;
    if (this.ready) return true;
    clearTimeout(this.timer);
    const session = this.session;
    const r = await ChannelConnection.open(this.ctx, session);
    if (this.off || session !== this.session) {
      if (r.ok) r.connection.close();
      return false;
    }
    if (!r.ok) {
      this.ctx.log.debug?.('keywarden.channel.unavailable', {
        code: r.error.code,
        reason: r.error.reason,
        offered: r.offered,
      });
      const transient = ['network', 'timeout', 'verification', 'rate_limited', 'server'].includes(r.error.code);
      if (!r.offered || !transient) this.off = true;
      else this.retry(r.error.retryAfter !== undefined ? r.error.retryAfter * 1000 : undefined);
      this.deliver({ kind: 'state', state: 'closed', error: r.error });
      return false;
    }
    this.attempts = 0;
    this.conn = r.connection;
    r.connection.on('push', (push: ChannelPush) => this.deliver({ kind: 'push', push }));
    r.connection.on('close', (c: ChannelClose) => {
      if (this.conn === r.connection) this.conn = undefined;
      this.deliver({ kind: 'state', state: 'closed', close: c, ...(c.error ? { error: c.error } : {}) });
      if (FINAL_CLOSE.has(c.code)) this.off = true;
      else this.retry();
    });
    this.deliver({ kind: 'state', state: 'open' });
    r.connection.start(); // may refuse a frame that followed the hello, and close at once
    return this.ready;
  }

  call(
    op: 'heartbeat/start' | 'heartbeat' | 'heartbeat/stop',
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (!this.conn) return Promise.reject(new KeywardenError('network', 'channel closed', { notSent: true }));
    return this.conn.call(op, body);
  }

  /** After a re-authentication: the channel of the new session. */
  async rebind(session: string): Promise<boolean> {
    this.session = session;
    this.conn?.close();
    this.conn = undefined;
    this.attempts = 0;
    this.off = false;
    return this.connect();
  }

  /** For good. */
  close(): void {
    this.off = true;
    clearTimeout(this.timer);
    this.conn?.close();
    this.conn = undefined;
  }

  private retry(hintMs?: number): void {
    if (this.off) return;
    const base = Math.min(30_000, 500 * 2 ** this.attempts++);
    const delay = Math.max(hintMs ?? 0, base * (0.8 + Math.random() * 0.4));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.connect(), delay);
    this.timer.unref();
  }

  private deliver(e: LinkEvent): void {
    if (this.sink) this.sink(e);
    else this.backlog.push(e);
  }
}
