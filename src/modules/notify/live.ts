// Live updates for dashboards (docs/spec.md "Live update stream", docs/protocol.md 9): a WebSocket at /api/ws
// (JSON frames, or MessagePack with the `msgpack` subprotocol) and Server-Sent Events at
// /api/apps/{id}/events. Events come from the EventBus (every worker receives every event) and
// each subscriber gets only what its scoping allows, with hidden fields removed.
//
// Access is followed, not captured (docs/protocol.md 11.24): a watcher keeps the token it connected with,
// and whenever an access signal arrives (a team change, a sign-out, a password change, a deletion)
// or an app is deleted, and every REVALIDATE_MS anyway, each watcher is authenticated again and
// each of its apps checked again: a revoked session's stream is closed, an app no longer visible
// is dropped (an SSE stream, which watches one app, is closed), and scope and hiding follow the
// current permissions.
// API tokens (docs/protocol.md 13.1) open streams with `logs:read` and only in the Authorization header;
// one in the query string is refused. Browsers, which cannot set that header on a WebSocket, keep
// the kw_session cookie or a sign-in token in `?token=`.
// Backpressure is bounded: a WebSocket whose send buffer passes MAX_BACKPRESSURE is closed by
// uWS; an SSE stream that stays backed up past the same amount is closed by us.
import { pack, unpack } from '../../platform/cluster/names.js';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import type { Principal, DashboardAuth, AccessSignal, AccountRepository } from '../access/index.js';
import {
  sightOf,
  visible,
  resellerScope,
  bearerToken,
  fromOwnOrigin,
  headerToken,
  refuseTokenInQuery,
} from '../access/index.js';
import type { EventBus, LiveEvent } from './events.js';
import { errorReply } from '../../platform/http/error-reply.js';
import { mountEventStream, mountSocket, type Socket, type Upgrade } from '../../platform/http/sockets.js';
import type { HttpServer } from '../../platform/http/uws.js';

const MAX_BACKPRESSURE = 1024 * 1024;
/** Every watcher is checked again this often even without a signal (a lost signal, an expiry). */
const REVALIDATE_MS = 15_000;
const APP_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Events every subscriber of the app may see, whoever's records they touch. */
const APP_WIDE = new Set(['app.delete']);

/** One open stream: a WebSocket (any number of apps) or an SSE response (one app). */
interface Watcher {
  /** The dashboard token it authenticated with, checked again on every revalidation. */
  readonly token: string;
  /** The stream's route, which an API token's scopes are checked against again. */
  readonly route: string;
  principal: Principal;
  /** app id -> null (sees every record) or the reseller ids whose records it may see. */
  readonly apps: Map<string, ReadonlySet<string> | null>;
  /** SSE: losing its one app ends the stream. */
  readonly single: boolean;
  send(frame: Record<string, unknown>): void;
  /** Ends the stream (revoked access); the transport's close handler calls `this.forget`. */
  end(reason: string): void;
  /** Checks the stream again when its credential expires (docs/protocol.md 11.35: closed within 1 s). */
  expiry?: NodeJS.Timeout | undefined;
}

/** The longest delay a timer takes (about 24.8 days); a later expiry is armed by a later re-check. */
const MAX_TIMER_MS = 2_147_483_647;

interface LiveDeps {
  log: Logger;
  auth: DashboardAuth;
  /** The apps module's check that the caller sees an application (404 otherwise): a port compose.ts fills. */
  apps: { visible(p: Principal, appId: string): Promise<unknown> };
  events: EventBus;
  access: AccessSignal;
  accounts: Pick<AccountRepository, 'subtreeIds'>;
  /** The client address of a WebSocket upgrade (an API token's last use). */
  resolveIp?: (remote: string, forwardedFor: string | undefined) => string;
}

/** docs/spec.md "Reseller scoping and hiding" applied to one event for one subscriber; null: not for them. */
function eventFor(
  sub: { principal: Principal; scope: ReadonlySet<string> | null },
  e: LiveEvent,
): Record<string, unknown> | null {
  if (sub.scope && !APP_WIDE.has(e.kind) && !(e.reseller_id && sub.scope.has(e.reseller_id))) return null;
  return { id: e.id, kind: e.kind, app_id: e.app_id, at: e.at, data: visible(sightOf(sub.principal), e.data) };
}

export class LiveHub {
  private readonly byApp = new Map<string, Set<Watcher>>();
  private readonly watchers = new Set<Watcher>();
  private readonly offs: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** One revalidation at a time; a signal during one schedules exactly one more. */
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly d: LiveDeps) {}

  start(): void {
    this.offs.push(
      this.d.events.on((e) => {
        this.dispatch(e);
        if (e.kind === 'app.delete') this.revalidate();
      }),
      this.d.access.on(() => this.revalidate()),
    );
    this.timer = setInterval(() => this.revalidate(), REVALIDATE_MS);
    this.timer.unref();
  }

  stop(): void {
    for (const off of this.offs.splice(0)) off();
    clearInterval(this.timer);
  }

  get subscriberCount(): number {
    let n = 0;
    for (const s of this.byApp.values()) n += s.size;
    return n;
  }

  private dispatch(e: LiveEvent): void {
    if (e.kind.startsWith('account.') || e.kind.startsWith('job.')) {
      // About one account: every WebSocket it has open (an SSE stream watches one app's records).
      const event = { id: e.id, kind: e.kind, app_id: null, at: e.at, data: e.data };
      for (const w of this.watchers)
        if (!w.single && w.principal.account.id === e.data.account_id) w.send({ type: 'event', event });
      return;
    }
    for (const w of this.byApp.get(e.app_id) ?? []) {
      const scope = w.apps.get(e.app_id);
      if (scope === undefined) continue;
      const event = eventFor({ principal: w.principal, scope }, e);
      if (event) w.send({ type: 'event', event });
    }
  }

  /** The scope a principal watches an app with; throws when the app is not visible to it. */
  private async scopeFor(principal: Principal, appId: string): Promise<ReadonlySet<string> | null> {
    if (!APP_ID.test(appId)) throw new AppError('app_not_found');
    await this.d.apps.visible(principal, appId);
    const ids = await resellerScope(this.d.accounts, principal);
    return ids ? new Set(ids) : null;
  }

  /** Registers a stream; returns it so the transport can subscribe it and forget it when it closes. */
  private watch(w: Omit<Watcher, 'apps'>): Watcher {
    const watcher: Watcher = { ...w, apps: new Map() };
    this.watchers.add(watcher);
    this.armExpiry(watcher);
    return watcher;
  }

  /** Re-checks the stream the moment its credential expires (the re-check then ends it). */
  private armExpiry(w: Watcher): void {
    clearTimeout(w.expiry);
    w.expiry = undefined;
    const at = w.principal.expiresAt;
    if (at === undefined) return;
    const ms = Math.max(0, at - Date.now()) + 10;
    if (ms > MAX_TIMER_MS) return;
    w.expiry = setTimeout(() => void this.recheck(w), ms);
    w.expiry.unref();
  }

  /** Subscribes a stream to an app; subscribing twice to one app is one subscription. */
  private async subscribe(w: Watcher, appId: string): Promise<void> {
    const scope = await this.scopeFor(w.principal, appId);
    if (!this.watchers.has(w)) return; // closed meanwhile
    w.apps.set(appId, scope);
    let set = this.byApp.get(appId);
    if (!set) this.byApp.set(appId, (set = new Set()));
    set.add(w);
  }

  private unsubscribe(w: Watcher, appId: string): void {
    w.apps.delete(appId);
    const set = this.byApp.get(appId);
    set?.delete(w);
    if (set?.size === 0) this.byApp.delete(appId);
  }

  /** The transport's close handler: the stream is gone. */
  private forget(w: Watcher): void {
    clearTimeout(w.expiry);
    this.watchers.delete(w);
    for (const appId of [...w.apps.keys()]) this.unsubscribe(w, appId);
  }

  /** Checks every stream against current access (coalesced: at most one run queued behind the current). */
  revalidate(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await Promise.all([...this.watchers].map((w) => this.recheck(w)));
      } while (this.again);
    })()
      .catch((err: unknown) => this.d.log.error({ err }, 'live.revalidate_failed'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async recheck(w: Watcher): Promise<void> {
    let principal: Principal | null;
    try {
      principal = await this.d.auth.authenticate(w.token, { recheck: true });
      if (principal) this.d.auth.admit(principal, 'get', w.route);
    } catch (err) {
      // subscription_expired and the like end the stream; an outage keeps it until the next check
      if (!(err instanceof AppError)) return;
      principal = null;
    }
    if (!this.watchers.has(w)) return;
    if (!principal) {
      this.forget(w);
      w.end('Access revoked');
      return;
    }
    w.principal = principal;
    this.armExpiry(w);
    for (const appId of [...w.apps.keys()]) {
      try {
        const scope = await this.scopeFor(principal, appId);
        if (w.apps.has(appId)) w.apps.set(appId, scope);
      } catch (err) {
        if (!(err instanceof AppError)) continue;
        this.unsubscribe(w, appId);
        if (w.single) {
          this.forget(w);
          w.end(err.detail as string);
          return;
        }
        w.send({ type: 'unsubscribed', app_id: appId, detail: err.detail });
      }
    }
  }

  /** Registers /api/ws and /api/apps/:id/events on the server. */
  mount(server: HttpServer): void {
    this.mountWebSocket(server);
    this.mountSse(server);
  }

  private mountWebSocket(server: HttpServer): void {
    interface WsData {
      /** Who the socket belongs to, from the upgrade until open() makes the watcher. */
      who: { token: string; principal: Principal } | null;
      watcher: Watcher | null;
      msgpack: boolean;
      /**
       * False once the socket closed or was ended: a subscribe's continuation (or any later send)
       * must then touch nothing.
       */
      open: boolean;
    }
    mountSocket<WsData>(server, {
      path: '/api/ws',
      maxBackpressure: MAX_BACKPRESSURE,
      maxPayloadLength: 16 * 1024,
      idleTimeoutS: 120,
      failed: (err) => errorReply(err, this.d.log, { route: '/api/ws' }),
      upgrade: ({ headers, query, remote }) => {
        const protocols = (headers['sec-websocket-protocol'] ?? '')
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean);
        const ip = this.d.resolveIp ? this.d.resolveIp(remote, headers['x-forwarded-for']) : remote;
        try {
          refuseTokenInQuery(query);
        } catch (err) {
          return { refuse: errorReply(err, this.d.log) };
        }
        // Browsers cannot set Authorization on a WebSocket: the kw_session cookie or ?token= (a
        // sign-in token, never an API token) work too.
        const fromQuery = query.get('token') ?? undefined;
        const token = headerToken(headers) ?? fromQuery ?? bearerToken(headers);
        // A cookie goes along with any page's WebSocket: like a cookie-authenticated write, the
        // upgrade must come from the dashboard's own origin (cross-site WebSocket hijacking).
        const byCookie = !headerToken(headers) && fromQuery === undefined && token !== undefined;
        if (byCookie && fromOwnOrigin(headers, this.d.auth.trustedOrigins) !== true)
          return { refuse: errorReply(new AppError('cross_site'), this.d.log) };
        return (token ? this.d.auth.authenticate(token, { ip }) : Promise.resolve(null))
          .then((principal) => {
            if (principal) this.d.auth.admit(principal, 'get', '/api/ws');
            return principal;
          })
          .then((principal): Upgrade<WsData> => {
            if (!principal || !token) return { refuse: errorReply(new AppError('not_authenticated'), this.d.log) };
            // The chosen subprotocol goes through the upgrade: a header written first would turn this into a 200.
            const msgpack = protocols.includes('msgpack');
            // The watcher is made in open(), once there is a socket to send on and close.
            return {
              accept: { who: { token, principal }, watcher: null, msgpack, open: false },
              protocol: msgpack ? 'msgpack' : (protocols[0] ?? ''),
            };
          });
      },
      open: (ws: Socket, data) => {
        const who = data.who;
        data.who = null;
        if (!who) return ws.end(1011, 'Internal error');
        data.open = true;
        data.watcher = this.watch({
          token: who.token,
          route: '/api/ws',
          principal: who.principal,
          single: false,
          send: (frame) => {
            if (!data.open) return;
            if (data.msgpack) ws.send(pack(frame), true);
            else ws.send(JSON.stringify(frame), false);
          },
          end: (reason) => {
            if (!data.open) return;
            data.open = false;
            ws.end(1008, reason);
          },
        });
      },
      message: (data, message, isBinary) => {
        const w = data.watcher;
        if (!w) return;
        let msg: { type?: unknown; app_id?: unknown };
        try {
          const bytes = Buffer.from(message);
          msg =
            isBinary && data.msgpack
              ? (unpack(bytes) as typeof msg)
              : (JSON.parse(bytes.toString('utf8')) as typeof msg);
        } catch {
          w.send({ type: 'error', detail: 'Malformed JSON body' });
          return;
        }
        if (msg?.type !== 'subscribe' || typeof msg.app_id !== 'string') {
          w.send({ type: 'error', detail: 'Expected {"type":"subscribe","app_id":...}' });
          return;
        }
        const appId = msg.app_id;
        this.subscribe(w, appId).then(
          () => w.send({ type: 'subscribed', app_id: appId }),
          (err: unknown) =>
            w.send({
              type: 'error',
              app_id: appId,
              detail: err instanceof AppError ? err.detail : 'Internal server error',
            }),
        );
      },
      close: (data) => {
        data.open = false;
        if (data.watcher) this.forget(data.watcher);
      },
    });
  }

  private mountSse(server: HttpServer): void {
    mountEventStream(server, {
      pattern: '/api/apps/:id/events',
      paramCount: 1,
      maxBackpressure: MAX_BACKPRESSURE,
      open: ({ headers, query, params: [appId = ''], remote }, stream, onClose) => {
        /** Events wait for the 200 and its headers; a revocation before them becomes the 401. */
        let started = false;
        let revokedEarly = false;
        let watcher: Watcher | undefined;
        onClose(() => {
          if (watcher) this.forget(watcher);
        });
        const ip = this.d.resolveIp ? this.d.resolveIp(remote, headers['x-forwarded-for']) : remote;
        const route = `/api/apps/${appId}/events`;
        const token = bearerToken(headers);
        const write = (chunk: string): void => {
          if (!stream.ended && !stream.write(chunk)) this.d.log.warn({ appId }, 'sse.slow_subscriber_dropped');
        };
        (async () => {
          refuseTokenInQuery(query);
          const principal = token ? await this.d.auth.authenticate(token, { ip }) : null;
          if (!principal || !token) throw new AppError('not_authenticated');
          await this.d.auth.reach(principal, route);
          this.d.auth.admit(principal, 'get', route);
          const w = this.watch({
            token,
            route,
            principal,
            single: true,
            send: (frame) => {
              const e = frame.event as { kind: string } | undefined;
              if (started && frame.type === 'event' && e) write(`event: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`);
            },
            end: (reason) => {
              if (!started) {
                revokedEarly = true;
                return;
              }
              if (stream.ended) return;
              write(`event: closed\ndata: ${JSON.stringify({ detail: reason })}\n\n`);
              stream.end();
            },
          });
          watcher = w;
          if (stream.ended) return this.forget(w);
          try {
            await this.subscribe(w, appId);
          } catch (err) {
            this.forget(w);
            throw err;
          }
          if (stream.ended) return this.forget(w);
          if (revokedEarly) throw new AppError('not_authenticated');
          started = true;
          stream.start(
            { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' },
            ': subscribed\n\n',
          );
        })().catch((err: unknown) => {
          stream.refuse(errorReply(err, this.d.log, { route: '/api/apps/:id/events' }));
        });
      },
    });
  }
}
