// The realtime client channel, GET /api/client/ws (docs/protocol.md "Realtime channel"): an
// activated client session carries its heartbeat over one WebSocket and receives pushes (revoked,
// update_required, notice). The upgrade passes the client gate of every REST call
// (client/client-gate.ts); each call on the channel goes through the same gate and services as its
// REST twin, so the heartbeat rules, refusals and audit lines are those of docs/protocol.md 6. The wire
// format is client-channel.protocol.ts.
// The socket itself (uWS: upgrade, cork, backpressure) is platform/http/sockets.ts's: this file sees
// a Socket and plain data only. A message's ArrayBuffer is read before the handler returns.
// Limits: connections per IP (this worker), upgrades per IP per minute (cluster-wide), calls in
// flight per connection, message size, and a bounded send buffer (uWS closes a slow reader).
import { Type } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import { AppError, rateLimited, ValidationError } from '../../errors.js';
import { randomToken, x25519KeyPair } from '../../platform/crypto/index.js';
import { expiryWindowMs, beatInterval } from '../heartbeat/index.js';
import { outcome, BeatBody, StartBody, StopBody, clientCallRunner, noteEchoedRoute } from '../client/index.js';
import type { CachedApp, ClientCall, ClientDeps, ClientInput, ClientSession } from '../client/index.js';
import type { HeartbeatGateway } from '../heartbeat/index.js';
import { consumeOrThrow } from '../../platform/limits/lockout.js';
import { appVerdict, sessionKey, type ClientPushService, type Push, type RevokeReason } from './client-push.service.js';
import type { ClientIpResolver } from '../../platform/http/client-ip.js';
import { signReply } from '../../platform/http/client-signing.js';
import { errorReply } from '../../platform/http/error-reply.js';
import type { IncomingRequest, Reply } from '../../platform/http/types.js';
import { mountSocket, type Socket, type SocketRequest, type Upgrade } from '../../platform/http/sockets.js';
import type { HttpServer } from '../../platform/http/uws.js';
import { KeySlots } from './key-slots.js';
import { ChannelConns, type Conn } from './channel-conns.js';
import {
  buildHello,
  CHANNEL_PATH,
  CLOSE,
  KEY_FORMAT,
  verifyFrame,
  parseClientMessage,
  REVOKE_DETAIL,
  sealFrame,
  type BuiltHello,
  type ChannelOp,
  type ClientMessage,
} from './client-channel.protocol.js';

/** Bytes a connection may have waiting to be sent before uWS drops it as a slow reader. */
const CHANNEL_MAX_BACKPRESSURE = 64 * 1024;
/** Largest client message (a beat is about 300 bytes). */
const CHANNEL_MAX_PAYLOAD = 8 * 1024;
/** uWS pings an idle connection and closes one that stays silent this long (seconds). */
const CHANNEL_TRANSPORT_IDLE_S = 120;

interface ChannelLimits {
  /** Open (and opening) connections per client IP on this worker. */
  maxPerIp: number;
  /** Calls a connection may have queued before it is closed (1008). */
  maxInFlight: number;
}

interface ClientChannelDeps {
  log: Logger;
  now: () => number;
  client: ClientDeps;
  heartbeats: Pick<HeartbeatGateway, 'start' | 'beat' | 'stop'>;
  push: ClientPushService;
  /** Upgrades per IP per minute, shared by every worker. */
  limiter: RequestLimiter;
  resolveIp: ClientIpResolver;
}

const OpenBody = Type.Object({
  session: Type.String({ minLength: 1, maxLength: 128 }),
  version: Type.String({ maxLength: 4096 }),
});

interface Opened {
  app: CachedApp;
  session: string;
  /** The session's record as the upgrade found it (without its response key: the channel encrypts no body). */
  record: ClientSession;
  version: string;
  conn: string;
  interval: number;
  hello: BuiltHello;
}

const END_OBJECT = Buffer.from('}');

export class ClientChannel {
  readonly limits: ChannelLimits = { maxPerIp: 32, maxInFlight: 8 };
  private readonly conns = new ChannelConns();
  private readonly slots = new KeySlots();
  private readonly tickets = new Map<number, (o: Opened) => void>();
  private ticketSeq = 0;
  private sweeper: NodeJS.Timeout | undefined;
  private unlisten: (() => void) | undefined;
  /** The worker is shutting down: no new calls, connections end once their calls in flight are answered. */
  private closing = false;
  private readonly open: (input: ClientInput) => Promise<Reply>;
  private readonly calls: Record<ChannelOp, (input: ClientInput) => Reply | Promise<Reply>>;
  /** Counters for /metrics. */
  pushed = 0;
  dropped = 0;

  constructor(private readonly d: ClientChannelDeps) {
    const open = clientCallRunner(
      d.client,
      {
        action: 'client.channel',
        schema: OpenBody,
        identifiesBy: 'session',
        disabledDetail: 'plain',
        sessionDevice: true,
      },
      (call) => this.opening(call),
    );
    this.open = async (input) => open(input);
    const spec = { identifiesBy: 'session', disabledDetail: 'plain', sessionDevice: true } as const;
    this.calls = {
      'heartbeat/start': clientCallRunner(
        d.client,
        { ...spec, action: 'client.heartbeat.start', schema: StartBody },
        (c) => d.heartbeats.start(c),
      ),
      heartbeat: clientCallRunner(d.client, { ...spec, action: 'client.heartbeat', schema: BeatBody }, (c) =>
        d.heartbeats.beat(c),
      ),
      'heartbeat/stop': clientCallRunner(
        d.client,
        { ...spec, action: 'client.heartbeat.stop', schema: StopBody },
        (c) => d.heartbeats.stop(c),
      ),
    };
  }

  /** Connections open on this worker. */
  get size(): number {
    return this.conns.all.size;
  }

  start(): void {
    this.unlisten = this.d.push.listen((p) => this.onPush(p));
    this.sweeper = setInterval(() => this.sweep(), 1_000);
    this.sweeper.unref();
  }

  /** Answers the calls in flight (up to 5 s), then closes every connection with 1001: clients reconnect elsewhere. */
  async stop(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweeper);
    this.unlisten?.();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.conns.all].map((c) => c.queue ?? undefined)),
      new Promise((resolve) => (timer = setTimeout(resolve, 5_000))),
    ]);
    clearTimeout(timer);
    for (const c of [...this.conns.all]) this.end(c, CLOSE.goingAway, 'server shutting down');
  }

  // ---- the upgrade: the client gate, then the signed hello ------------------------------------

  /** The gate's last step for the channel: the nonce is the client's key, the session must be activated. */
  private opening(call: ClientCall<{ session: string; version: string; ticket?: number }>) {
    return outcome(async (note) => {
      if (!KEY_FORMAT.test(call.nonce)) {
        throw new ValidationError([
          {
            loc: ['header', 'x-nonce'],
            msg: 'X-Nonce must be base64url of a 32-byte X25519 public key',
            type: 'value_error',
          },
        ]);
      }
      if (call.body.version.length < 1 || call.body.version.length > 64) {
        throw new ValidationError([
          {
            loc: ['header', 'x-client-version'],
            msg: 'X-Client-Version must be 1 to 64 characters',
            type: 'value_error',
          },
        ]);
      }
      const s = call.session!;
      if (!this.d.client.sessions.isActivated(s.record)) throw new AppError('session_not_activated');
      const conn = randomToken(16);
      const interval = beatInterval(call.app.row.heartbeat_interval);
      const eph = x25519KeyPair();
      const hello = buildHello(
        this.d.client.signingKey(),
        { ts: Math.floor(this.d.now() / 1000), session: s.token, clientKey: call.nonce, conn, beatInterval: interval },
        eph.secretKey,
      );
      eph.secretKey.fill(0);
      if (!hello) {
        throw new ValidationError([
          { loc: ['header', 'x-nonce'], msg: 'X-Nonce is not a usable X25519 public key', type: 'value_error' },
        ]);
      }
      this.tickets.get(call.body.ticket ?? -1)?.({
        app: call.app,
        session: s.token,
        record: { ...s.record, encKey: null },
        version: call.body.version,
        conn,
        interval,
        hello,
      });
      note.detail = 'Realtime channel opened';
      return { body: {} };
    });
  }

  mount(server: HttpServer): void {
    mountSocket<Conn>(server, {
      path: CHANNEL_PATH,
      maxPayloadLength: CHANNEL_MAX_PAYLOAD,
      maxBackpressure: CHANNEL_MAX_BACKPRESSURE,
      idleTimeoutS: CHANNEL_TRANSPORT_IDLE_S,
      dropSlowReaders: true,
      upgrade: (req) => this.upgrade(req),
      failed: (err) => errorReply(err, this.d.log, { route: CHANNEL_PATH }),
      open: (socket, c) => this.opened(socket, c),
      message: (c, message, isBinary) => this.message(c, message, isBinary),
      close: (c, code, duringUpgrade) => this.closed(c, code, duringUpgrade),
    });
  }

  /** The upgrade: the client gate, then the connection (its hello is sent once it opens). */
  private upgrade(req: SocketRequest): Upgrade<Conn> | Promise<Upgrade<Conn>> {
    const { headers } = req;
    const ip = this.d.resolveIp(req.remote, headers['x-forwarded-for']);
    const nonce = headers['x-nonce'] ?? '';
    noteEchoedRoute(this.d.client.affinity, headers['x-keywarden-route']);
    const refuse = (reply: Reply) => ({
      refuse: signReply(reply, this.d.client.signingKey(), 'GET', CHANNEL_PATH, nonce, this.d.now()),
    });
    if (this.conns.countFor(ip) >= this.limits.maxPerIp) {
      this.d.log.warn({ ip }, 'channel.too_many_connections');
      return refuse(errorReply(rateLimited(5), this.d.log));
    }
    this.conns.upgrading(ip, 1);
    const signed: IncomingRequest = {
      method: 'get',
      path: CHANNEL_PATH,
      query: new URLSearchParams(),
      headers,
      ip,
      params: {},
      body: Buffer.alloc(0),
    };
    const ticket = ++this.ticketSeq;
    let opened: Opened | undefined;
    this.tickets.set(ticket, (o) => {
      opened = o;
    });
    return this.open({
      ip,
      nonce,
      signed,
      body: async () => {
        await consumeOrThrow(this.d.limiter, ip, rateLimited);
        return { session: headers['x-session'] ?? '', version: headers['x-client-version'] ?? '1.0', ticket };
      },
    })
      .then((reply): Upgrade<Conn> => {
        if (reply.status !== 200 || !opened) return refuse(reply);
        return { accept: this.connOf(opened, ip, nonce) };
      })
      .catch((err: unknown) => refuse(errorReply(err, this.d.log, { route: CHANNEL_PATH })))
      .finally(() => {
        this.tickets.delete(ticket);
        this.conns.upgrading(ip, -1);
      });
  }

  private connOf(o: Opened, ip: string, clientKey: string): Conn {
    const now = this.d.now();
    return {
      id: o.conn,
      session: o.session,
      key: sessionKey(o.session),
      record: o.record,
      ip,
      clientKey,
      version: o.version,
      keys: o.hello.keys,
      slot: -1,
      openedAt: now,
      socket: null,
      hello: o.hello.text,
      app: o.app,
      outSeq: 0,
      inSeq: 0,
      interval: o.interval,
      deadline: now + expiryWindowMs(o.interval),
      queue: null,
      inflight: 0,
      closed: false,
      updateNotified: null,
    };
  }

  private opened(socket: Socket, c: Conn): void {
    c.socket = socket;
    c.slot = this.slots.take(c.keys!);
    c.keys = null;
    // One channel per session: a newer one (a reconnect) replaces an older one, here or elsewhere.
    const older = this.conns.add(c);
    if (older) this.end(older, CLOSE.superseded, 'superseded by a newer connection');
    this.d.push.attached(c.session, c.id, c.openedAt);
    socket.send(c.hello!, false);
    c.hello = null;
    const app = c.app;
    c.app = null;
    this.judge(c, app);
  }

  private closed(c: Conn, code: number, duringUpgrade: boolean): void {
    // uWS's cork() can close a socket upgraded inside it, right after its open handler, when the
    // upgrade reallocated it in place (uNetworking/uWebSockets#1929, fixed upstream after the builds
    // we ship). Rare and harmless to state (no call was read on it); the client reconnects.
    if (duringUpgrade && code === 1006)
      this.d.log.warn({ appId: c.record.appId, ip: c.ip }, 'channel.closed_by_upgrade');
    c.closed = true;
    c.socket = null;
    if (c.slot >= 0) this.slots.release(c.slot);
    c.slot = -1;
    this.conns.remove(c);
  }

  private end(c: Conn, code: number, reason: string): void {
    if (c.closed || !c.socket) return;
    c.socket.end(code, reason); // calls `closed` at once
  }

  // ---- client messages ------------------------------------------------------------------------

  private message(c: Conn, message: ArrayBuffer, isBinary: boolean): void {
    if (c.closed) return;
    // The ArrayBuffer is only valid during this callback: verified and parsed before returning.
    if (!isBinary) return this.end(c, CLOSE.protocol, 'binary frames only');
    const payload = verifyFrame(this.slots.c2s(c.slot), new Uint8Array(message));
    if (!payload) return this.end(c, CLOSE.protocol, 'bad MAC');
    const m = parseClientMessage(payload, c.inSeq + 1);
    if (typeof m === 'string') return this.end(c, CLOSE.protocol, m);
    c.inSeq = m.seq;
    if (m.type === 'ping') return this.send(c, { type: 'pong', re: m.seq, ts: Math.floor(this.d.now() / 1000) });
    if (this.closing) return this.end(c, CLOSE.goingAway, 'server shutting down');
    if (c.inflight >= this.limits.maxInFlight) return this.end(c, CLOSE.protocol, 'too many calls in flight');
    c.inflight++;
    if (c.inflight > 1) {
      c.queue = (c.queue ?? Promise.resolve())
        .then(() => this.handle(c, m))
        .then(
          () => this.settled(c),
          (err: unknown) => this.callFailed(c, err),
        );
      return;
    }
    // Nothing in flight: the call runs now, inside this handler (its answer is corked with it), and
    // one that needs nothing waited for (a beat on this worker's own session) ends here too.
    let running: void | Promise<void>;
    try {
      running = this.handle(c, m);
    } catch (err) {
      return this.callFailed(c, err);
    }
    if (running) {
      c.queue = running.then(
        () => this.settled(c),
        (err: unknown) => this.callFailed(c, err),
      );
    } else this.settled(c);
  }

  private settled(c: Conn): void {
    if (--c.inflight === 0) c.queue = null;
  }

  private callFailed(c: Conn, err: unknown): void {
    if (--c.inflight === 0) c.queue = null;
    this.d.log.error({ err }, 'channel.call_failed');
    this.end(c, CLOSE.serverError, 'internal error');
  }

  private handle(c: Conn, m: Extract<ClientMessage, { type: 'call' }>): void | Promise<void> {
    if (c.closed) return; // nobody would read the answer: a beat is never applied unanswered
    // A beat uses the session bound at the upgrade; a start or stop (one per heartbeat) reads it
    // afresh, so a start after a new activation on this session claims the seat of its new key.
    const reply = this.calls[m.op]({
      ip: c.ip,
      nonce: c.clientKey,
      // The message's body is this call's own (parsed from the frame): the session goes into it.
      body: () => {
        m.body.session = c.session;
        return m.body;
      },
      bound: m.op === 'heartbeat' ? c.record : undefined,
    });
    if (reply instanceof Promise) return reply.then((r) => this.answer(c, m, r));
    this.answer(c, m, reply);
  }

  private answer(c: Conn, m: Extract<ClientMessage, { type: 'call' }>, reply: Reply): void {
    if (reply.status === 200 && m.op !== 'heartbeat/stop') {
      if (m.op === 'heartbeat/start') {
        const started = JSON.parse(reply.body.toString()) as { beat_interval?: number };
        if (typeof started.beat_interval === 'number') c.interval = started.beat_interval;
      }
      c.deadline = this.d.now() + expiryWindowMs(c.interval);
    }
    const retry = reply.headers['Retry-After'];
    const head =
      `{"seq":${c.outSeq + 1},"type":"reply","re":${m.seq},"status":${reply.status},` +
      `${retry ? `"retry_after":${Number(retry)},` : ''}"body":`;
    // The reply body is already JSON: framed as it is, not decoded and encoded again.
    this.sendRaw(
      c,
      typeof reply.body === 'string'
        ? `${head}${reply.body}}`
        : Buffer.concat([Buffer.from(head), reply.body, END_OBJECT]),
    );
    if (m.op === 'heartbeat/stop' && reply.status === 200) this.end(c, CLOSE.normal, 'heartbeat stopped');
  }

  private send(c: Conn, msg: Record<string, unknown>): void {
    this.sendRaw(c, JSON.stringify({ seq: c.outSeq + 1, ...msg }));
  }

  private sendRaw(c: Conn, payload: string | Buffer): void {
    if (c.closed || !c.socket) return;
    c.outSeq++;
    // Not sent: the connection was over CHANNEL_MAX_BACKPRESSURE and is cut off (sockets.ts).
    const appId = c.record.appId;
    const ip = c.ip;
    if (!c.socket.send(sealFrame(this.slots.s2c(c.slot), payload), true)) {
      this.dropped++;
      this.d.log.warn({ appId, ip }, 'channel.slow_client_dropped');
    }
  }

  private sweep(): void {
    const now = this.d.now();
    for (const c of [...this.conns.all]) if (c.deadline <= now) this.end(c, CLOSE.idle, 'no heartbeat');
  }

  // ---- pushes ---------------------------------------------------------------------------------

  private onPush(p: Push): void | Promise<void> {
    switch (p.kind) {
      case 'revoke':
        for (const c of this.conns.targets(p.target)) {
          // A kill made by this connection's own beat is announced after that beat's reply.
          if (p.reason === 'session_killed' && c.inflight > 0)
            void (c.queue ?? Promise.resolve()).then(() => this.revoke(c, p.reason));
          else this.revoke(c, p.reason);
        }
        break;
      case 'notice':
        for (const c of this.conns.ofApp(p.appId)) {
          this.pushed++;
          this.send(c, { type: 'notice', message: p.message, at: p.at });
        }
        break;
      case 'app_changed':
        if (this.conns.hasApp(p.appId)) void this.recheck(p.appId);
        break;
      case 'supersede': {
        const c = this.conns.ofSession(p.sessionKey);
        if (c && c.id !== p.conn && c.openedAt <= p.at)
          this.end(c, CLOSE.superseded, 'superseded by a newer connection');
        break;
      }
      case 'shutdown':
        return this.stop();
    }
  }

  private async recheck(appId: string): Promise<void> {
    let app: CachedApp | null;
    try {
      app = await this.d.push.app(appId);
    } catch (err) {
      this.d.log.warn({ err, appId }, 'channel.app_recheck_failed');
      return;
    }
    for (const c of this.conns.ofApp(appId)) this.judge(c, app);
  }

  private judge(c: Conn, app: CachedApp | null): void {
    const v = appVerdict(app, { ip: c.ip, hwid: c.record.hwid, version: c.version });
    if (v.kind === 'revoke') this.revoke(c, v.reason);
    else if (v.kind === 'update_required' && c.updateNotified !== v.version) {
      c.updateNotified = v.version;
      this.pushed++;
      this.send(c, { type: 'update_required', detail: v.detail });
    }
  }

  /** Tells the client, closes the channel, and ends the session on whichever worker owns it. */
  private revoke(c: Conn, reason: RevokeReason): void {
    if (c.closed) return;
    this.pushed++;
    this.send(c, { type: 'revoked', reason, detail: REVOKE_DETAIL[reason] });
    this.end(c, CLOSE.revoked, reason);
    if (reason !== 'session_killed') {
      this.d.push
        .endSession(c.session, reason === 'expired' ? 'expired' : 'revoked')
        .catch((err: unknown) => this.d.log.warn({ err }, 'channel.end_session_failed'));
    }
  }
}
