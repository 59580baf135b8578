// The only module that touches uWebSockets.js request/response objects (docs/architecture.md "House practices" 1, 2).
// uWS rules this file enforces for every route, so no route has to remember them:
// - `req` is only valid synchronously inside the handler: headers, url, params and the peer
//   address are copied out before anything awaits;
// - a handler that returns without responding and without `onAborted` crashes the process:
//   onAborted is registered first, always;
// - a body is aggregated from onData chunks (copied: uWS reuses the ArrayBuffer) up to a cap;
// - after every await, an aborted response is never touched; status and headers are written
//   inside cork().
import { STATUS_CODES } from 'node:http';
import type { Logger } from 'pino';
import type * as UwsTypes from 'uWebSockets.js';
import type { ClientIpResolver } from './client-ip.js';
import type { IncomingRequest, Method, Reply, RouteHandler } from './types.js';
import { AppError } from '../../errors.js';
import { errorReply } from './error-reply.js';
import { streamBody, type BodyStream } from './body-stream.js';
import { pumpFile } from './file-reply.js';
import type { Uws } from './uws-loader.js';

export { loadUws } from './uws-loader.js';
type UwsApp = UwsTypes.TemplatedApp;
type UwsResponse = UwsTypes.HttpResponse;
type UwsRequest = UwsTypes.HttpRequest;
// Modules see no uWS type: WebSockets and event streams are sockets.ts's (eslint.config.js).

/**
 * `closeOnBackpressureLimit` on, for either build: the 20.57 definitions type the option as a
 * boolean, the 20.30 ones as a number, and the binding reads it as an integer (`true` is 1). The
 * value is spelled once here, typed as whichever build the compiler checks against.
 */
export const CLOSE_ON_BACKPRESSURE_LIMIT = true as unknown as NonNullable<
  UwsTypes.WebSocketBehavior<unknown>['closeOnBackpressureLimit']
>;

interface RouteMount {
  method: Method;
  /** uWS pattern, e.g. `/api/apps/:id`. */
  pattern: string;
  bodyLimit: number;
  /** Hand the body to the handler as it arrives (IncomingRequest.upload) instead of gathering it. */
  streamBody?: boolean;
  handler: RouteHandler;
}

interface HttpServerOptions {
  log: Logger;
  resolveIp: ClientIpResolver;
  onReply?: (pattern: string, method: Method, status: number, startedAt: bigint) => void;
  /**
   * Turns an error reply the guard made into what leaves the server (under /api/client/ every
   * answer is signed, docs/protocol.md 4); identity when absent.
   */
  finishError?: (method: string, path: string, nonce: string, reply: Reply) => Reply;
}

/**
 * One guard around every uWS callback. uWS calls handlers synchronously from C++: a throw that
 * escapes one ends the process, and a handler that returns without answering and without
 * onAborted does too. The guard answers a synchronous throw at once with the catalogue's reply
 * (signed under /api/client/), so no parser bug in any route can take the service down;
 * asynchronous failures are each handler's promise chain's to answer (they all end in errorReply).
 */
interface Guard {
  http(fn: (res: UwsResponse, req: UwsRequest) => void): (res: UwsResponse, req: UwsRequest) => void;
  upgrade(
    fn: (res: UwsResponse, req: UwsRequest, context: UwsTypes.us_socket_context_t) => void,
  ): (res: UwsResponse, req: UwsRequest, context: UwsTypes.us_socket_context_t) => void;
  /** A WebSocket callback (open, message, close, drain): a throw is logged and the socket closed. */
  socket<U, A extends unknown[]>(
    name: string,
    fn: (ws: UwsTypes.WebSocket<U>, ...rest: A) => void,
  ): (ws: UwsTypes.WebSocket<U>, ...rest: A) => void;
}

interface Inflight {
  count: number;
  idle: (() => void)[];
}

export interface HttpServer {
  readonly app: UwsApp;
  readonly guard: Guard;
  mount(route: RouteMount): void;
  /** Catch-all for unmatched paths; call after every mount. */
  mountFallback(handler: RouteHandler): void;
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops accepting connections; requests on open ones are still served, each answer closing its
   * connection (a balancer's pooled connections end one by one, none is cut under a request).
   */
  stopAccepting(): void;
  /** Stops accepting connections and answers 503 to new requests; in-flight requests go on. */
  stopListening(): void;
  /** Resolves when no request is in flight (or after timeoutMs). */
  drain(timeoutMs: number): Promise<boolean>;
  /** Requests being read or answered now. */
  readonly inflight: number;
}

const UWS_METHOD: Record<Method, 'get' | 'post' | 'put' | 'patch' | 'del'> = {
  get: 'get',
  post: 'post',
  put: 'put',
  patch: 'patch',
  delete: 'del',
};

/** The body of a request that has none: shared, never written to. */
const NO_BODY = Buffer.alloc(0);

function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

/** What a handler may need from uWS's `req`, copied now: `req` is invalid once the handler returns. */
export function copyRequest(
  req: UwsRequest,
  paramCount = 0,
): { headers: Record<string, string>; query: URLSearchParams; params: string[] } {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    headers[k] = v;
  });
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  return { headers, query: new URLSearchParams(req.getQuery() ?? ''), params };
}

/** Writes a reply unless the response was aborted: status, then headers, then body, inside cork. */
export function writeReply(res: UwsResponse, aborted: boolean, reply: Reply, closeConnection = false): void {
  if (aborted) return;
  res.cork(() => {
    res.writeStatus(statusLine(reply.status));
    for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!);
    res.end(reply.body, closeConnection);
  });
}

/** A response's abort state; `wake` resumes a stream waiting for the client to drain. */
interface AbortState {
  v: boolean;
  wake?: (() => void) | undefined;
}

/**
 * Streams `reply.stream`: status and headers first, then each chunk in cork(); when uWS reports
 * backpressure (write() false: the chunk is buffered, the socket is behind) nothing more is produced
 * until onWritable says the client drained. An abort ends the wait and the iterator, so whatever
 * produces the chunks (a database cursor) stops. A failure after the headers cannot become an error
 * reply: the connection is closed, so the client sees a cut body, never a complete-looking one.
 */
async function pumpStream(
  res: UwsResponse,
  aborted: AbortState,
  reply: Reply,
  closeConnection: boolean,
  log: Logger,
): Promise<void> {
  const it = reply.stream!;
  let finished = false;
  try {
    if (aborted.v) return;
    res.cork(() => {
      res.writeStatus(statusLine(reply.status));
      for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!);
    });
    for (;;) {
      const next = await it.next();
      if (aborted.v) return;
      if (next.done) break;
      let ok = true;
      res.cork(() => {
        ok = res.write(next.value);
      });
      if (!ok) {
        await new Promise<void>((resolve) => {
          aborted.wake = resolve;
          res.onWritable(() => {
            aborted.wake = undefined;
            resolve();
            return true;
          });
        });
        if (aborted.v) return;
      }
    }
    finished = true;
    res.cork(() => res.end(undefined, closeConnection));
  } catch (err) {
    log.error({ err }, 'http.stream_failed');
    if (!aborted.v) res.close();
  } finally {
    if (!finished) await it.return?.().catch(() => undefined);
  }
}

function createGuard(opts: Pick<HttpServerOptions, 'log' | 'finishError'>): Guard {
  const answer = (res: UwsResponse, method: string, path: string, nonce: string, err: unknown) => {
    opts.log.error({ err, path }, 'http.handler_threw');
    const reply = errorReply(err, opts.log, { path });
    try {
      writeReply(res, false, opts.finishError ? opts.finishError(method, path, nonce, reply) : reply, true);
    } catch {
      // answered or aborted before the throw: nothing left to say on this response
    }
  };
  const http =
    <A extends unknown[]>(fn: (res: UwsResponse, req: UwsRequest, ...rest: A) => void) =>
    (res: UwsResponse, req: UwsRequest, ...rest: A): void => {
      try {
        fn(res, req, ...rest);
      } catch (err) {
        // Still synchronous: req is valid here.
        let method = '';
        let path = '';
        let nonce = '';
        try {
          method = req.getMethod();
          path = req.getUrl();
          nonce = req.getHeader('x-nonce');
        } catch {
          // req itself failed: answer without them
        }
        answer(res, method, path, nonce, err);
      }
    };
  return {
    http,
    upgrade: http,
    socket:
      (name, fn) =>
      (ws, ...rest) => {
        try {
          fn(ws, ...rest);
        } catch (err) {
          opts.log.error({ err, callback: name }, 'ws.handler_threw');
          try {
            ws.end(1011, 'Internal error');
          } catch {
            // already closed
          }
        }
      },
  };
}

/** A Content-Length uWS accepts: a decimal number of at most 9 digits. */
const DECLARED_LENGTH = /^\d{1,9}$/;

export function createHttpServer(uws: Uws, opts: HttpServerOptions): HttpServer {
  const guard = createGuard(opts);
  const app = uws.App();
  const inflight: Inflight = { count: 0, idle: [] };
  // Every port listened on (the shared port and, with affinity, the worker's own).
  const listenSockets: UwsTypes.us_listen_socket[] = [];
  let closing = false;
  /** Not accepting connections any more: every answer closes its connection (stopAccepting). */
  let lingering = false;

  const finishOne = () => {
    inflight.count--;
    if (inflight.count === 0) for (const wake of inflight.idle.splice(0)) wake();
  };

  function send(res: UwsResponse, aborted: AbortState, reply: Reply, closeConnection: boolean): Promise<void> | void {
    const close = closeConnection || closing || lingering;
    if (reply.stream) return pumpStream(res, aborted, reply, close, opts.log);
    if (reply.file) return pumpFile(res, aborted, reply, opts.log);
    writeReply(res, aborted.v, reply, close);
  }

  function handle(route: RouteMount | undefined, fallback: RouteHandler, paramNames: string[]) {
    return guard.http((res: UwsResponse, req: UwsRequest): void => {
      const startedAt = process.hrtime.bigint();
      const aborted: AbortState = { v: false };
      let cancelBody: (() => void) | undefined;
      res.onAborted(() => {
        aborted.v = true;
        aborted.wake?.(); // a stream waiting for the client to drain
        cancelBody?.(); // an upload cut short never sends its last chunk: stop waiting for it
      });
      // Everything from `req` is copied now: it is invalid after this function returns.
      const headers: Record<string, string> = {};
      req.forEach((k, v) => {
        headers[k] = v;
      });
      const method = req.getMethod() as Method;
      const path = req.getUrl();
      if (closing) {
        // Shutting down: nothing below may run against a pool that is closing. The client retries
        // after Retry-After (on another worker, or on this service once it is back).
        const reply = errorReply(new AppError('unavailable', undefined, { 'Retry-After': '1' }), opts.log);
        send(res, aborted, opts.finishError?.(method, path, headers['x-nonce'] ?? '', reply) ?? reply, true);
        return;
      }
      // docs/protocol.md 11.33 (docs/security.md "Declared lengths"): uWS closes the connection right after
      // this callback on a Content-Length of 10 digits or more or one that is not a decimal number,
      // whatever we answer. No handler may act on such a request (a DELETE would run to the end):
      // it gets the 413 it would get anyway, which seldom leaves before the close.
      const length = headers['content-length'];
      if (length !== undefined && !DECLARED_LENGTH.test(length)) {
        const reply = errorReply(new AppError('payload_too_large'), opts.log);
        send(res, aborted, opts.finishError?.(method, path, headers['x-nonce'] ?? '', reply) ?? reply, true);
        return;
      }
      const query = new URLSearchParams(req.getQuery() ?? '');
      let handler = route?.handler ?? fallback;
      const params: Record<string, string> = {};
      for (let i = 0; i < paramNames.length; i++) {
        try {
          params[paramNames[i]!] = decodeURIComponent(req.getParameter(i) ?? '');
        } catch {
          handler = fallback; // malformed %-escape in a path segment: nothing can match it
        }
      }
      const ip = opts.resolveIp(Buffer.from(res.getRemoteAddressAsText()).toString(), headers['x-forwarded-for']);
      const limit = route?.bodyLimit ?? 0;

      const declared = headers['content-length'] !== undefined ? Number(headers['content-length']) : undefined;
      const bodyless = method === 'get' || method === 'delete';
      const announcedTooLarge = !bodyless && declared !== undefined && declared > limit;
      let closeAfter = announcedTooLarge;
      inflight.count++;
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        finishOne();
      };
      const failed = (err: unknown) => opts.log.error({ err, path }, 'http.reply_failed');
      // A streamed upload answered before its last byte: the rest is never read, the connection closes.
      let streamed: BodyStream | undefined;
      const deliver = (reply: Reply): void | Promise<void> => {
        if (streamed && !streamed.complete) closeAfter = true;
        const noted = () => opts.onReply?.(route?.pattern ?? 'unmatched', method, reply.status, startedAt);
        const sending = send(res, aborted, reply, closeAfter);
        if (sending) return sending.then(noted);
        noted();
      };
      // The body is all here (synchronously, in the onData callback of its last chunk, or at once
      // when there is none): the handler runs, and a reply it has at once is written at once.
      const respond = (body: Buffer | 'too_large' | 'aborted', upload?: BodyStream): void => {
        try {
          if (body === 'aborted') return end();
          if (body === 'too_large') closeAfter = true;
          const incoming: IncomingRequest = {
            method,
            path,
            query,
            headers,
            ip,
            params,
            body,
            ...(upload && { upload }),
          };
          let reply: Reply | Promise<Reply>;
          try {
            reply = handler(incoming);
          } catch (err) {
            reply = errorReply(err, opts.log, { path });
          }
          const sent =
            reply instanceof Promise
              ? reply.catch((err: unknown) => errorReply(err, opts.log, { path })).then(deliver)
              : deliver(reply);
          if (sent) void sent.catch(failed).finally(end);
          else end();
        } catch (err) {
          failed(err);
          end();
        }
      };
      if (bodyless) respond(NO_BODY);
      else if (announcedTooLarge)
        respond('too_large'); // answered unread, then closed
      else if (route?.streamBody) {
        // The handler reads the body as it comes; a reply before its last byte closes the connection.
        const upload = streamBody(res, limit);
        cancelBody = upload.abort;
        streamed = upload.body;
        respond(NO_BODY, streamed);
      } else cancelBody = readBody(res, limit, respond);
    });
  }

  let fallbackHandler: RouteHandler = async () => ({
    status: 404,
    body: '{"detail":"Not found"}',
    headers: { 'Content-Type': 'application/json' },
  });

  return {
    app,
    guard,
    mount(route) {
      const paramNames = [...route.pattern.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
      app[UWS_METHOD[route.method]](
        route.pattern,
        handle(route, (r) => fallbackHandler(r), paramNames),
      );
    },
    mountFallback(handler) {
      fallbackHandler = handler;
      app.any('/*', handle(undefined, handler, []));
    },
    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`cannot listen on ${host}:${port}`));
          listenSockets.push(socket);
          resolve(uws.us_socket_local_port(socket as unknown as UwsTypes.us_socket));
        });
      });
    },
    get inflight() {
      return inflight.count;
    },
    stopAccepting() {
      lingering = true;
      for (const socket of listenSockets.splice(0)) uws.us_listen_socket_close(socket);
    },
    stopListening() {
      closing = true;
      for (const socket of listenSockets.splice(0)) uws.us_listen_socket_close(socket);
    },
    drain(timeoutMs) {
      if (inflight.count === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        inflight.idle.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
  };
}

/**
 * Reads a body of at most `limit` bytes and hands it to `done` once (from the callback of its last
 * chunk); past the limit it keeps reading, and dropping, to the end ('too_large'). The returned
 * function hands over 'aborted' instead when the response is aborted first: a cut upload never
 * delivers its last chunk.
 */
function readBody(res: UwsResponse, limit: number, done: (body: Buffer | 'too_large' | 'aborted') => void): () => void {
  let settled = false;
  const settle = (v: Buffer | 'too_large' | 'aborted') => {
    if (settled) return;
    settled = true;
    done(v);
  };
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  res.onData((chunk, isLast) => {
    if (!tooLarge) {
      size += chunk.byteLength;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
      } else if (chunk.byteLength > 0) {
        chunks.push(Buffer.from(chunk.slice(0))); // copy: uWS reuses this memory after the callback
      }
    }
    if (isLast) settle(tooLarge ? 'too_large' : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  });
  return () => settle('aborted');
}
