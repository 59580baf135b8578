// A pass-through proxy in front of a real server that can play an outage for SDK tests. Plain HTTP
// only: every answer carries `Connection: close` (each call is a fresh connection, so during the
// outage every SDK sees a refused connection: nothing sent) and a WebSocket upgrade gets a plain 404
// (the SDKs beat over REST). Requests get an X-Forwarded-For of this proxy's own, so tests through it
// never spend the rate-limit budget of direct calls.
//
// Control, from any test process: `POST <url>/__outage` with `{"ms": n, "ban"?: "<license key>"}`.
// The proxy answers 200, then stops listening (connections are refused) for n ms. Before it listens
// again on the same port, the server forgets the heartbeat sessions whose calls came through this
// proxy (what a restart without their state does) and, with `ban`, that key is banned from the
// dashboard (which also ends the key's sessions). `GET <url>/__outage` answers
// `{"outages", "forgotten"}` so far.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OutageHooks {
  /** The server drops these heartbeat sessions. */
  forget(sessions: string[]): Promise<void> | void;
  /** Bans a license key from the dashboard. */
  ban(key: string): Promise<void>;
}

export interface OutageProxy {
  readonly url: string;
  close(): Promise<void>;
}

const HOP = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host'];
const HEARTBEAT = /^\/api\/client\/heartbeat(\/start)?$/;

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startOutageProxy(
  targetBase: string,
  hooks: OutageHooks,
  ip = '198.51.100.50',
): Promise<OutageProxy> {
  const target = new URL(targetBase);
  const seen = new Set<string>();
  let outages = 0;
  let forgotten = 0;
  let closed = false;
  let pending: NodeJS.Timeout | undefined;

  const forward = async (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => {
    const path = req.url ?? '/';
    if (HEARTBEAT.test(path.split('?')[0]!)) {
      try {
        const s = (JSON.parse(body.toString('utf8')) as { session?: unknown }).session;
        if (typeof s === 'string') seen.add(s);
      } catch {
        // not JSON: the server refuses it; nothing to remember
      }
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && !HOP.includes(k)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    headers['x-forwarded-for'] = ip;
    headers['content-length'] = String(body.length);
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path, headers }, (u) => {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(u.headers))
        if (v !== undefined && !HOP.includes(k)) out[k] = Array.isArray(v) ? v.join(', ') : v;
      const chunks: Buffer[] = [];
      u.on('data', (c: Buffer) => chunks.push(c));
      u.on('end', () => {
        const b = Buffer.concat(chunks);
        res.writeHead(u.statusCode ?? 502, { ...out, 'content-length': String(b.length), connection: 'close' });
        res.end(b);
      });
    });
    up.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' });
      res.end(`outage proxy: ${String(err)}`);
    });
    up.end(body);
  };

  const server: http.Server = http.createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      if ((req.url ?? '').startsWith('/__outage')) {
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
          return void res.end(JSON.stringify({ outages, forgotten }));
        }
        let o: { ms?: unknown; ban?: unknown };
        try {
          o = JSON.parse(body.toString('utf8') || '{}') as typeof o;
        } catch {
          o = {};
        }
        const ms = typeof o.ms === 'number' && o.ms > 0 && o.ms <= 60_000 ? o.ms : undefined;
        if (ms === undefined) {
          res.writeHead(400, { 'content-type': 'text/plain', connection: 'close' });
          return void res.end('POST /__outage needs {"ms": 1..60000}');
        }
        res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
        res.end(JSON.stringify({ ms }), () => void outage(ms, typeof o.ban === 'string' ? o.ban : undefined));
        return;
      }
      await forward(req, res, body);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' });
      res.end(`outage proxy: ${String(err)}`);
    });
  });
  server.on('upgrade', (_req, socket) =>
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'),
  );

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  async function outage(ms: number, ban: string | undefined): Promise<void> {
    outages++;
    server.close();
    server.closeAllConnections();
    const started = Date.now();
    const sessions = [...seen];
    seen.clear();
    try {
      await hooks.forget(sessions);
      forgotten += sessions.length;
      if (ban) await hooks.ban(ban);
    } catch (err) {
      // The test then sees a server that did not forget or ban, and fails on what it expected.
      console.error('outage proxy:', err);
    }
    await new Promise<void>((resolve) => {
      pending = setTimeout(resolve, Math.max(0, ms - (Date.now() - started)));
    });
    pending = undefined;
    if (!closed) server.listen(port, '127.0.0.1');
  }

  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        closed = true;
        clearTimeout(pending);
        server.closeAllConnections();
        if (!server.listening) return resolve();
        server.close(() => resolve());
      }),
  };
}
