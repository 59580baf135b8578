// Live updates for dashboards (SPEC "Live update stream", PROTOCOL 9): a WebSocket at /api/ws
// (JSON frames, or MessagePack with the `msgpack` subprotocol) and Server-Sent Events at
// /api/apps/{id}/events. Events come from the EventBus (every worker receives every event) and
// each subscriber gets only what its scoping allows, with hidden fields removed.
// Backpressure is bounded: a WebSocket whose send buffer passes MAX_BACKPRESSURE is closed by
// uWS; an SSE stream that stays backed up past the same amount is closed by us.
import { pack, unpack } from 'msgpackr';
import type { Logger } from 'pino';
import type * as Uws from 'uWebSockets.js';
import { AppError } from '../errors.js';
import type { Principal } from '../services/principal.js';
import { hasPermission } from '../services/principal.js';
import type { DashboardAuth } from '../services/dashboard-auth.service.js';
import type { AppsService } from '../services/apps.service.js';
import type { EventBus, LiveEvent } from '../services/events.js';
import { bearerToken } from '../http/dashboard-route.js';
import { errorReply } from '../http/error-reply.js';
import { CLOSE_ON_BACKPRESSURE_LIMIT, copyRequest, writeReply } from '../http/uws.js';

export const MAX_BACKPRESSURE = 1024 * 1024;
const APP_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Events every subscriber of the app may see, whoever's records they touch. */
const APP_WIDE = new Set(['app.delete']);

interface Subscriber {
  principal: Principal;
  /** null: sees every record; else the reseller ids whose records it may see. */
  scope: ReadonlySet<string> | null;
  send(frame: Record<string, unknown>): void;
}

export interface LiveDeps {
  log: Logger;
  auth: DashboardAuth;
  apps: AppsService;
  events: EventBus;
}

const HIDDEN_WITHOUT_HWID = ['hwid', 'known_hwids'];
const HIDDEN_WITHOUT_IP = ['ip', 'known_countries', 'city', 'region', 'country', 'lat', 'lon', 'location'];
/** PROTOCOL 11.17: screenshot paths need both view_hwid and view_ip. */
const SCREENSHOT_FIELDS = ['last_screenshot_path', 'activation_screenshot_path', 'screenshot_path', 'screen'];

/** SPEC "Reseller scoping and hiding" applied to one event for one subscriber; null: not for them. */
export function eventFor(sub: Pick<Subscriber, 'principal' | 'scope'>, e: LiveEvent): Record<string, unknown> | null {
  if (sub.scope && !APP_WIDE.has(e.kind) && !(e.reseller_id && sub.scope.has(e.reseller_id))) return null;
  const data: Record<string, unknown> = { ...e.data };
  if (!hasPermission(sub.principal, 'view_hwid')) for (const k of HIDDEN_WITHOUT_HWID) delete data[k];
  if (!hasPermission(sub.principal, 'view_ip')) for (const k of HIDDEN_WITHOUT_IP) delete data[k];
  if (!hasPermission(sub.principal, 'view_hwid') || !hasPermission(sub.principal, 'view_ip'))
    for (const k of SCREENSHOT_FIELDS) delete data[k];
  return { id: e.id, kind: e.kind, app_id: e.app_id, at: e.at, data };
}

export class LiveHub {
  private readonly byApp = new Map<string, Set<Subscriber>>();
  private off: (() => void) | undefined;

  constructor(private readonly d: LiveDeps) {}

  start(): void {
    this.off = this.d.events.on((e) => this.dispatch(e));
  }

  stop(): void {
    this.off?.();
  }

  get subscriberCount(): number {
    let n = 0;
    for (const s of this.byApp.values()) n += s.size;
    return n;
  }

  private dispatch(e: LiveEvent): void {
    for (const sub of this.byApp.get(e.app_id) ?? []) {
      const event = eventFor(sub, e);
      if (event) sub.send({ type: 'event', event });
    }
  }

  /** Checks that the principal may watch the app, and registers the subscriber. */
  async subscribe(principal: Principal, appId: string, send: Subscriber['send']): Promise<() => void> {
    if (!APP_ID.test(appId)) throw new AppError('app_not_found');
    await this.d.apps.visible(principal, appId);
    const scoped = principal.role === 'admin' || principal.role === 'reseller';
    const sub: Subscriber = {
      principal,
      scope: scoped ? new Set(await this.d.apps.subtreeIds(principal.account.id)) : null,
      send,
    };
    let set = this.byApp.get(appId);
    if (!set) this.byApp.set(appId, (set = new Set()));
    set.add(sub);
    return () => {
      set.delete(sub);
      if (set.size === 0) this.byApp.delete(appId);
    };
  }

  /** Registers /api/ws and /api/apps/:id/events on the uWS app. */
  mount(app: Uws.TemplatedApp): void {
    this.mountWebSocket(app);
    this.mountSse(app);
  }

  private mountWebSocket(app: Uws.TemplatedApp): void {
    interface WsData {
      principal: Principal | null;
      msgpack: boolean;
      unsubs: (() => void)[];
      closed: boolean;
    }
    const hub = this;
    app.ws<WsData>('/api/ws', {
      maxBackpressure: MAX_BACKPRESSURE,
      closeOnBackpressureLimit: CLOSE_ON_BACKPRESSURE_LIMIT,
      maxPayloadLength: 16 * 1024,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        // uWS: register onAborted before the await, copy everything from req now.
        let aborted = false;
        res.onAborted(() => {
          aborted = true;
        });
        const { headers, query } = copyRequest(req);
        const key = headers['sec-websocket-key'] ?? '';
        const protocols = (headers['sec-websocket-protocol'] ?? '')
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean);
        const extensions = headers['sec-websocket-extensions'] ?? '';
        // Browsers cannot set Authorization on a WebSocket: the kw_session cookie or ?token= work too.
        const token = bearerToken(headers) ?? query.get('token') ?? undefined;
        (token ? hub.d.auth.authenticate(token).catch(() => null) : Promise.resolve(null)).then(
          (principal) => {
            if (!principal) return writeReply(res, aborted, errorReply(new AppError('not_authenticated'), hub.d.log));
            if (aborted) return;
            res.cork(() => {
              // The chosen subprotocol goes through upgrade(): a header written first would turn this into a 200.
              const msgpack = protocols.includes('msgpack');
              res.upgrade<WsData>(
                { principal, msgpack, unsubs: [], closed: false },
                key,
                msgpack ? 'msgpack' : (protocols[0] ?? ''),
                extensions,
                context,
              );
            });
          },
          (err: unknown) => writeReply(res, aborted, errorReply(err, hub.d.log, { route: '/api/ws' })),
        );
      },
      message: (ws, message, isBinary) => {
        const data = ws.getUserData();
        const send = (frame: Record<string, unknown>) => {
          if (data.closed) return;
          if (data.msgpack) ws.send(pack(frame), true);
          else ws.send(JSON.stringify(frame), false);
        };
        let msg: { type?: unknown; app_id?: unknown };
        try {
          const bytes = Buffer.from(message);
          msg =
            isBinary && data.msgpack
              ? (unpack(bytes) as typeof msg)
              : (JSON.parse(bytes.toString('utf8')) as typeof msg);
        } catch {
          send({ type: 'error', detail: 'Malformed JSON body' });
          return;
        }
        if (msg?.type !== 'subscribe' || typeof msg.app_id !== 'string') {
          send({ type: 'error', detail: 'Expected {"type":"subscribe","app_id":...}' });
          return;
        }
        const appId = msg.app_id;
        hub.subscribe(data.principal!, appId, send).then(
          (unsub) => {
            if (data.closed) return unsub();
            data.unsubs.push(unsub);
            send({ type: 'subscribed', app_id: appId });
          },
          (err: unknown) =>
            send({
              type: 'error',
              app_id: appId,
              detail: err instanceof AppError ? err.detail : 'Internal server error',
            }),
        );
      },
      close: (ws) => {
        const data = ws.getUserData();
        data.closed = true;
        for (const u of data.unsubs) u();
      },
    });
  }

  private mountSse(app: Uws.TemplatedApp): void {
    const hub = this;
    app.get('/api/apps/:id/events', (res, req) => {
      let closed = false;
      const unsubs: (() => void)[] = [];
      const cleanup = () => {
        closed = true;
        for (const u of unsubs) u();
      };
      res.onAborted(cleanup);
      const {
        headers,
        params: [appId = ''],
      } = copyRequest(req, 1);
      const token = bearerToken(headers);
      let backedUp = 0;
      const write = (chunk: string): void => {
        if (closed) return;
        res.cork(() => {
          const ok = res.write(chunk);
          backedUp = ok ? 0 : backedUp + chunk.length;
        });
        if (backedUp > MAX_BACKPRESSURE) {
          hub.d.log.warn({ appId }, 'sse.slow_subscriber_dropped');
          closed = true;
          res.close();
          cleanup();
        }
      };
      (async () => {
        const principal = token ? await hub.d.auth.authenticate(token) : null;
        if (!principal) throw new AppError('not_authenticated');
        const unsub = await hub.subscribe(principal, appId, (frame) => {
          const e = frame.event as { kind: string };
          write(`event: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`);
        });
        if (closed) return unsub();
        unsubs.push(unsub);
        res.cork(() => {
          res
            .writeStatus('200 OK')
            .writeHeader('Content-Type', 'text/event-stream')
            .writeHeader('Cache-Control', 'no-cache')
            .writeHeader('X-Accel-Buffering', 'no');
          res.write(': subscribed\n\n');
        });
      })().catch((err: unknown) => {
        const wasClosed = closed;
        closed = true;
        writeReply(res, wasClosed, errorReply(err, hub.d.log, { route: '/api/apps/:id/events' }));
      });
    });
  }
}
