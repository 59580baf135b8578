// The HTTP layer, replaceable through the `transport` option. The default one is built on
// node:http/https (not fetch) because a heartbeat must know whether its request can have reached
// the server: a connection that was never established means nothing was sent and the same beat
// may be sent again; anything later means the server may have acted on it.
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { Socket } from 'node:net';

export interface TransportRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
  timeoutMs: number;
}

export interface TransportResponse {
  status: number;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  body: Uint8Array;
}

export type Transport = (req: TransportRequest) => Promise<TransportResponse>;

/**
 * What a transport throws. `sent: false` promises that no byte of the request reached the server
 * (connection refused, DNS failure, proxy refused the tunnel). Any other error a custom transport
 * throws counts as `network` with `sent: true`.
 */
export class TransportError extends Error {
  constructor(
    readonly kind: 'network' | 'timeout',
    readonly sent: boolean,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TransportError';
  }
}

export interface DefaultTransportOptions {
  /** http://[user:pass@]host:port of an HTTP proxy (CONNECT is used for https targets). */
  proxy?: string;
  /** Largest response body accepted; bigger answers are a network error. Default 1 MiB. */
  maxResponseBytes?: number;
}

export function defaultTransport(o: DefaultTransportOptions = {}): Transport {
  const proxy = o.proxy ? new URL(o.proxy) : undefined;
  if (proxy && proxy.protocol !== 'http:') throw new TypeError('proxy must be an http:// URL');
  const max = o.maxResponseBytes ?? 1 << 20;
  return (req) =>
    new Promise<TransportResponse>((resolve, reject) => {
      const target = new URL(req.url);
      const secure = target.protocol === 'https:';
      let sent = false;
      let settled = false;
      let active: http.ClientRequest | undefined;
      const done = (err: TransportError | undefined, res?: TransportResponse) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) {
          active?.destroy();
          reject(err);
        } else resolve(res!);
      };
      const timer = setTimeout(
        () => done(new TransportError('timeout', sent, `no answer within ${req.timeoutMs} ms`)),
        req.timeoutMs,
      );
      const fail = (err: unknown) =>
        done(new TransportError('network', sent, `${(err as Error)?.message ?? String(err)}`, { cause: err }));
      const proxyAuth = proxy?.username
        ? {
            'proxy-authorization': `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}`,
          }
        : undefined;

      const send = (
        options: http.RequestOptions | https.RequestOptions,
        mod: typeof http | typeof https,
        markSentOn: 'connect' | 'secureConnect' | 'now',
      ) => {
        if (markSentOn === 'now') sent = true;
        const r = mod.request(
          {
            ...options,
            method: req.method,
            agent: false,
            headers: { ...options.headers, ...req.headers, 'content-length': String(req.body.byteLength) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            let size = 0;
            res.on('data', (c: Buffer) => {
              size += c.length;
              if (size > max) fail(new Error(`response larger than ${max} bytes`));
              else chunks.push(c);
            });
            res.on('end', () => {
              const headers: Record<string, string> = {};
              for (const [k, v] of Object.entries(res.headers))
                if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
              done(undefined, { status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
            });
            res.on('error', fail);
            res.on('aborted', () => fail(new Error('response aborted')));
          },
        );
        active = r;
        if (markSentOn !== 'now') {
          r.on('socket', (s: Socket) => {
            s.once(markSentOn, () => {
              sent = true;
            });
          });
        }
        r.on('error', fail);
        r.end(Buffer.from(req.body));
      };

      const path = `${target.pathname}${target.search}`;
      const port = target.port || (secure ? '443' : '80');
      if (!proxy) {
        send({ host: target.hostname, port, path }, secure ? https : http, secure ? 'secureConnect' : 'connect');
      } else if (!secure) {
        // Plain HTTP through the proxy: absolute URI; reaching the proxy counts as sent.
        send(
          { host: proxy.hostname, port: proxy.port || '80', path: target.toString(), headers: { ...proxyAuth } },
          http,
          'connect',
        );
      } else {
        const c = http.request({
          host: proxy.hostname,
          port: proxy.port || '80',
          method: 'CONNECT',
          path: `${target.hostname}:${port}`,
          agent: false,
          headers: { host: `${target.hostname}:${port}`, ...proxyAuth },
        });
        active = c;
        c.on('connect', (res: http.IncomingMessage, socket: Socket) => {
          if (res.statusCode !== 200) {
            socket.destroy();
            return fail(new Error(`proxy refused the tunnel: ${res.statusCode}`));
          }
          const createConnection = () => tls.connect({ socket, servername: target.hostname });
          send({ host: target.hostname, port, path, createConnection } as http.RequestOptions, https, 'now');
        });
        c.on('error', fail);
        c.end();
      }
    });
}
