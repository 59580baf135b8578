// WebSocket endpoints and long-lived event streams on uWS, for modules that never see a uWS type:
// a module describes what to do on an upgrade, an open socket, a message and a close, or with an
// open stream, and this file keeps the uWS rules for it:
// - onAborted is registered before anything waits, and everything is copied out of `req` first;
// - a refused upgrade is an ordinary HTTP reply (written in cork, never on an aborted response);
// - an accepted one is upgraded inside res.cork; a socket closed by uWS during that cork is told to
//   the module (`duringUpgrade`), see docs/protocol.md "Messages" on uNetworking/uWebSockets#1929;
// - a closed socket or ended stream is never touched again (uWS throws on one);
// - backpressure: a reader over its budget is dropped (a socket with `dropSlowReaders`, a stream
//   always), and the module is told by `send`/`write` answering false.
import type * as UwsTypes from 'uWebSockets.js';
import type { Reply } from './types.js';
import { CLOSE_ON_BACKPRESSURE_LIMIT, copyRequest, writeReply, type HttpServer } from './uws.js';

/** A WebSocket as a module holds it. */
export interface Socket {
  /**
   * Sends one message. False when it was not sent: the socket is closed, or (with `dropSlowReaders`)
   * it had more than `maxBackpressure` bytes waiting and was dropped (closed without a close frame).
   */
  send(data: string | Uint8Array, binary: boolean): boolean;
  /** Closes with a close frame; the endpoint's `close` runs at once. Nothing on a closed socket. */
  end(code: number, reason: string): void;
}

/** What an upgrade or a stream request carried, copied before anything waits. */
export interface SocketRequest {
  headers: Record<string, string>;
  query: URLSearchParams;
  /** The route's parameters in order (streams). */
  params: string[];
  /** The peer address (before any trusted proxy's forwarded address is applied). */
  remote: string;
}

/** An upgrade's outcome: refused with an HTTP reply, or accepted with the socket's state. */
export type Upgrade<T> = { refuse: Reply } | { accept: T; protocol?: string };

interface SocketEndpoint<T> {
  path: string;
  maxPayloadLength: number;
  maxBackpressure: number;
  /** uWS pings an idle socket and closes one that stays silent this long (seconds). */
  idleTimeoutS: number;
  /** Close a socket whose send buffer is over `maxBackpressure` when a send finds it so. */
  dropSlowReaders?: boolean;
  upgrade(req: SocketRequest): Upgrade<T> | Promise<Upgrade<T>>;
  /** The reply to an upgrade that threw or rejected. */
  failed(err: unknown): Reply;
  open(socket: Socket, state: T): void;
  /** `message` is valid only until this returns: read it now. */
  message(state: T, message: ArrayBuffer, isBinary: boolean): void;
  /** `duringUpgrade`: uWS closed the socket inside the cork that upgraded it. */
  close(state: T, code: number, duringUpgrade: boolean): void;
}

interface Held<T> {
  state: T;
  closed: boolean;
}

export function mountSocket<T>(server: HttpServer, ep: SocketEndpoint<T>): void {
  const { app, guard } = server;
  /** The socket being upgraded (inside res.cork), to tell a close by uWS during it. */
  let upgrading: Held<T> | null = null;
  app.ws<Held<T>>(ep.path, {
    maxPayloadLength: ep.maxPayloadLength,
    maxBackpressure: ep.maxBackpressure,
    closeOnBackpressureLimit: CLOSE_ON_BACKPRESSURE_LIMIT,
    idleTimeout: ep.idleTimeoutS,
    sendPingsAutomatically: true,
    upgrade: guard.upgrade((res, req, context) => {
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      const { headers, query } = copyRequest(req);
      const remote = Buffer.from(res.getRemoteAddressAsText()).toString();
      const answer = (u: Upgrade<T>): void => {
        if ('refuse' in u) return writeReply(res, aborted, u.refuse);
        if (aborted) return;
        const held: Held<T> = { state: u.accept, closed: false };
        upgrading = held;
        try {
          res.cork(() => {
            res.upgrade<Held<T>>(
              held,
              headers['sec-websocket-key'] ?? '',
              u.protocol ?? '',
              headers['sec-websocket-extensions'] ?? '',
              context,
            );
          });
        } finally {
          upgrading = null;
        }
      };
      let out: Upgrade<T> | Promise<Upgrade<T>>;
      try {
        out = ep.upgrade({ headers, query, params: [], remote });
      } catch (err) {
        return writeReply(res, aborted, ep.failed(err));
      }
      if (out instanceof Promise) out.then(answer).catch((err: unknown) => writeReply(res, aborted, ep.failed(err)));
      else answer(out);
    }),
    open: guard.socket('open', (ws: UwsTypes.WebSocket<Held<T>>) => {
      const held = ws.getUserData();
      ep.open(socketOf(ws, held, ep), held.state);
    }),
    message: guard.socket('message', (ws: UwsTypes.WebSocket<Held<T>>, message: ArrayBuffer, isBinary: boolean) => {
      const held = ws.getUserData();
      if (!held.closed) ep.message(held.state, message, isBinary);
    }),
    close: guard.socket('close', (ws: UwsTypes.WebSocket<Held<T>>, code: number) => {
      const held = ws.getUserData();
      held.closed = true;
      ep.close(held.state, code, upgrading === held);
    }),
  });
}

function socketOf<T>(ws: UwsTypes.WebSocket<Held<T>>, held: Held<T>, ep: SocketEndpoint<T>): Socket {
  return {
    send(data, binary) {
      if (held.closed) return false;
      // 2: dropped, the socket is over maxBackpressure. The 20.30 uWS build does not close by itself
      // although closeOnBackpressureLimit is set: a reader that does not read is cut off here (no
      // close frame: it would queue behind the rest).
      const sent = ws.send(data, binary);
      if (ep.dropSlowReaders && (sent === 2 || ws.getBufferedAmount() > ep.maxBackpressure)) {
        ws.close();
        return false;
      }
      return true;
    },
    end(code, reason) {
      if (!held.closed) ws.end(code, reason);
    },
  };
}

/** A long-lived HTTP response (Server-Sent Events) as a module holds it. */
interface EventStream {
  /** The 200 with `headers`, then `first`. */
  start(headers: Record<string, string>, first: string): void;
  /** False when not written: the stream ended, or its reader fell over the budget and was dropped. */
  write(chunk: string): boolean;
  end(): void;
  /** An error reply instead of the stream (before `start`; nothing once the stream ended). */
  refuse(reply: Reply): void;
  readonly ended: boolean;
}

interface StreamEndpoint {
  /** uWS pattern with `:name` parameters, e.g. `/api/apps/:id/events`. */
  pattern: string;
  paramCount: number;
  /** Bytes a reader may fall behind by before it is dropped. */
  maxBackpressure: number;
  /** Called once per request; `onClose` runs when the client goes away or the stream is dropped. */
  open(req: SocketRequest, stream: EventStream, onClose: (fn: () => void) => void): void;
}

export function mountEventStream(server: HttpServer, ep: StreamEndpoint): void {
  const { app, guard } = server;
  app.get(
    ep.pattern,
    guard.http((res, req) => {
      let ended = false;
      let closeHook: (() => void) | undefined;
      const gone = () => {
        ended = true;
        closeHook?.();
      };
      res.onAborted(gone);
      const { headers, query, params } = copyRequest(req, ep.paramCount);
      const remote = Buffer.from(res.getRemoteAddressAsText()).toString();
      ep.open(
        { headers, query, params, remote },
        streamOf(
          res,
          ep,
          () => ended,
          gone,
          () => (ended = true),
        ),
        (fn) => {
          closeHook = fn;
        },
      );
    }),
  );
}

function streamOf(
  res: UwsTypes.HttpResponse,
  ep: StreamEndpoint,
  isEnded: () => boolean,
  dropped: () => void,
  finished: () => void,
): EventStream {
  let backedUp = 0;
  return {
    get ended() {
      return isEnded();
    },
    start(headers, first) {
      if (isEnded()) return;
      res.cork(() => {
        res.writeStatus('200 OK');
        for (const name in headers) res.writeHeader(name, headers[name]!);
        res.write(first);
      });
    },
    write(chunk) {
      if (isEnded()) return false;
      res.cork(() => {
        const ok = res.write(chunk);
        backedUp = ok ? 0 : backedUp + chunk.length;
      });
      if (backedUp > ep.maxBackpressure) {
        dropped();
        res.close();
        return false;
      }
      return true;
    },
    end() {
      if (isEnded()) return;
      finished();
      res.cork(() => res.end());
    },
    refuse(reply) {
      const was = isEnded();
      finished();
      writeReply(res, was, reply);
    },
  };
}
