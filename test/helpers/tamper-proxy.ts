// Fake servers for SDK refusal tests: one node:http proxy per mode, each on its own 127.0.0.1
// port 0, forwarding to the real server and spoiling its answer in one precise way. Re-signing
// modes use the server's real response-signing seed (the harness starts the server with it), so
// each mode breaks exactly one property and an SDK that skips that one check accepts the answer.
// Every proxy sends X-Forwarded-For with an address of its own (the harness server trusts
// 127.0.0.1), so tamper tests never spend the rate-limit budget of the SDK's direct calls.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { signingKeyFromSeed } from '../../src/platform/crypto/index.js';
import { signReply } from '../../src/platform/http/client-signing.js';

export const TAMPER_MODES = [
  'forged',
  'unsigned',
  'replayed',
  'foreign_nonce',
  'unknown_kid',
  'stale',
  'bad_base64',
  'bad_proof',
  'bad_beat_proof',
  'rate_limited',
] as const;
export type TamperMode = (typeof TAMPER_MODES)[number];

interface Upstream {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface TamperProxies {
  readonly urls: Record<TamperMode, string>;
  close(): Promise<void>;
}

const SIG_HEADERS = ['x-response-kid', 'x-response-timestamp', 'x-response-signature'];
const HOP_HEADERS = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host'];

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function forward(
  target: URL,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Promise<Upstream> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        method,
        path,
        headers: { ...headers, 'content-length': String(body.length) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const out: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined && !HOP_HEADERS.includes(k)) out[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve({ status: res.statusCode ?? 502, headers: out, body: Buffer.concat(chunks) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Replaces `proof` in a JSON body by a well-formed but wrong one. */
function spoilProof(body: Buffer): Buffer {
  try {
    const j = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    if (typeof j.proof !== 'string') return body;
    j.proof = randomBytes(32).toString('base64');
    return Buffer.from(JSON.stringify(j));
  } catch {
    return body;
  }
}

export async function startTamperProxies(
  targetBase: string,
  signingSeedB64: string,
  kid = 'k1',
): Promise<TamperProxies> {
  const target = new URL(targetBase);
  const real = { kid, ...signingKeyFromSeed(Buffer.from(signingSeedB64, 'base64')) };
  const foreign = { kid: 'k9', ...signingKeyFromSeed(randomBytes(32)) };
  const servers: http.Server[] = [];
  const urls = {} as Record<TamperMode, string>;
  const recorded = new Map<string, Upstream>();

  const resign = (
    u: Upstream,
    key: typeof real,
    method: string,
    path: string,
    nonce: string,
    nowMs: number,
  ): Upstream => {
    const signed = signReply({ status: u.status, body: u.body, headers: {} }, key, method, path, nonce, nowMs);
    const headers = { ...u.headers };
    for (const h of SIG_HEADERS) delete headers[h];
    return { status: u.status, body: u.body, headers: { ...headers, ...signed.headers } };
  };

  let ipSeq = 10;
  for (const mode of TAMPER_MODES) {
    const ip = `198.51.100.${ipSeq++}`;
    const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
      const method = req.method ?? 'GET';
      const path = req.url ?? '/';
      const bare = path.split('?')[0]!;
      const body = await readBody(req);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (v !== undefined && !HOP_HEADERS.includes(k)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      headers['x-forwarded-for'] = ip;
      const nonce = headers['x-nonce'] ?? '';
      if (mode === 'foreign_nonce') headers['x-nonce'] = randomBytes(16).toString('base64url');
      if (mode === 'rate_limited' && method === 'POST') {
        // Spend this address's whole bucket for the path first, so the real request below gets
        // the server's own 429, genuinely signed over the client's nonce, with Retry-After.
        for (let i = 0; i < 40; i++)
          await forward(
            target,
            'POST',
            path,
            { 'content-type': 'application/json', 'x-forwarded-for': ip },
            Buffer.from('{}'),
          );
      }
      let u: Upstream;
      if (mode === 'replayed' && recorded.has(bare)) u = recorded.get(bare)!;
      else u = await forward(target, method, path, headers, body);
      if (mode === 'replayed' && !recorded.has(bare)) recorded.set(bare, u);
      const client = bare.startsWith('/api/client/');
      if (client) {
        switch (mode) {
          case 'forged': {
            const b = Buffer.from(u.body);
            if (b.length > 0) b[Math.floor(b.length / 2)]! ^= 0x01;
            u = { ...u, body: b };
            break;
          }
          case 'unsigned': {
            const h = { ...u.headers };
            for (const x of SIG_HEADERS) delete h[x];
            u = { ...u, headers: h };
            break;
          }
          case 'unknown_kid':
            u = resign(u, foreign, method, bare, nonce, Date.now());
            break;
          case 'stale':
            u = resign(u, real, method, bare, nonce, Date.now() - 1_000_000);
            break;
          case 'bad_base64':
            u = { ...u, headers: { ...u.headers, 'x-response-signature': '!!notbase64!!' } };
            break;
          case 'bad_proof':
            if (bare === '/api/client/heartbeat/start' || bare === '/api/client/heartbeat')
              u = resign({ ...u, body: spoilProof(u.body) }, real, method, bare, nonce, Date.now());
            break;
          case 'bad_beat_proof':
            if (bare === '/api/client/heartbeat')
              u = resign({ ...u, body: spoilProof(u.body) }, real, method, bare, nonce, Date.now());
            break;
          default:
            break;
        }
      }
      res.writeHead(u.status, { ...u.headers, 'content-length': String(u.body.length) });
      res.end(u.body);
    };
    const server = http.createServer((req, res) => {
      handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`tamper proxy: ${String(err)}`);
      });
    });
    // No realtime channel through these fakes: an upgrade gets a plain (unsigned) 404, so SDKs beat over REST.
    server.on('upgrade', (_req, socket) =>
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    urls[mode] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  return {
    urls,
    async close() {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
