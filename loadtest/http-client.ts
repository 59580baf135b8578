// The few JSON calls the load test makes itself (dashboard sign-in, keys, /metrics), over
// node:http or node:https with the same trust as the generator: --ca for a private CA, or
// --insecure. Node's fetch takes no CA per call, hence this small client.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

export interface Trust {
  ca?: string;
  insecure: boolean;
}

export interface HttpAnswer {
  status: number;
  text: string;
  json<T = unknown>(): T;
}

export class HttpClient {
  private readonly agent: http.Agent;

  constructor(
    readonly origin: URL,
    trust: Trust,
  ) {
    this.agent =
      origin.protocol === 'https:'
        ? new https.Agent({
            keepAlive: true,
            maxSockets: 8,
            timeout: 4000, // an idle socket is dropped before the server's keep-alive timeout (uWS: 10 s) drops it
            ca: trust.ca ? fs.readFileSync(trust.ca) : undefined,
            rejectUnauthorized: !trust.insecure,
          })
        : new http.Agent({ keepAlive: true, maxSockets: 8, timeout: 4000 });
  }

  /**
   * One call. A reused keep-alive socket the server closed meanwhile fails at once (ECONNRESET,
   * "socket hang up"): that call never reached the server, so it is sent once more on a new socket.
   */
  async request(
    method: string,
    path: string,
    opts: { body?: unknown; token?: string; timeoutMs?: number; close?: boolean } = {},
  ): Promise<HttpAnswer> {
    try {
      return await this.once(method, path, opts);
    } catch (err) {
      if (!(err as { reused?: boolean }).reused) throw err;
      return this.once(method, path, opts);
    }
  }

  private once(
    method: string,
    path: string,
    opts: { body?: unknown; token?: string; timeoutMs?: number; close?: boolean },
  ): Promise<HttpAnswer> {
    const url = new URL(path, this.origin);
    const body = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body) headers['content-type'] = 'application/json';
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (opts.close) headers.connection = 'close';
    const lib = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = lib.request(url, { method, headers, agent: this.agent, timeout: opts.timeoutMs ?? 30_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('error', reject);
        res.once('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            text,
            json: <T>() => {
              try {
                return JSON.parse(text) as T;
              } catch {
                throw new Error(
                  `${method} ${url.pathname}: answer is not JSON (HTTP ${res.statusCode}): ${text.slice(0, 200)}`,
                );
              }
            },
          });
        });
      });
      req.once('timeout', () =>
        req.destroy(new Error(`${method} ${url.pathname}: no answer within ${(opts.timeoutMs ?? 30_000) / 1000} s`)),
      );
      req.once('error', (err: NodeJS.ErrnoException) => {
        const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.message === 'socket hang up');
        reject(Object.assign(err, { reused: stale }));
      });
      req.end(body);
    });
  }

  /** A JSON call that must answer 2xx: anything else is an error naming the call and the answer. */
  async call<T>(method: string, path: string, opts: { body?: unknown; token?: string } = {}): Promise<T> {
    const r = await this.request(method, path, opts);
    if (r.status < 200 || r.status >= 300) {
      throw new Error(`${method} ${path} -> HTTP ${r.status}: ${r.text.slice(0, 300)}`);
    }
    return r.json<T>();
  }

  close(): void {
    this.agent.destroy();
  }
}
