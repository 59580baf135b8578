// Declared lengths uWS itself refuses (docs/protocol.md 11.33, docs/security.md "Declared lengths"): a
// Content-Length of 10 digits or more, or one that is not a decimal number, makes uWS close the
// connection once the request's callback returns. No handler may act on such a request: a DELETE
// that used to run to the end deletes nothing now, a write stores nothing, and the server serves on.
// A declared length above a route's limit that uWS accepts is answered 413 before the body is read.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { createHttpServer, loadUws, type HttpServer } from '../../src/platform/http/uws.js';
import { createLogger } from '../../src/logger.js';
import { loadConfig } from '../../src/config.js';
import { jsonReply } from '../../src/platform/http/types.js';

let t: TestServer;
let owner: Api;
beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
});
afterAll(() => t.close());

/** Sends raw bytes and resolves with everything the server wrote back before it closed (or `ms` passed). */
function raw(request: string, ms = 5000): Promise<string> {
  const url = new URL(t.base);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(url.port), url.hostname);
    let got = '';
    const timer = setTimeout(() => sock.destroy(), ms);
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      // One answer is all a test needs; a kept-alive connection would otherwise wait for `ms`.
      if (/\r\n\r\n/.test(got) && /Content-Length: (\d+)/i.test(got)) {
        const len = Number(/Content-Length: (\d+)/i.exec(got)![1]);
        if (got.length - got.indexOf('\r\n\r\n') - 4 >= len) sock.destroy();
      }
    });
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
    sock.on('error', reject);
    sock.write(request);
  });
}

const LYING = ['4294967296', '9007199254740992', '1e20', '12345678901', 'abc', '-1', '0x10'];

describe('lengths uWS refuses', () => {
  it.each(LYING)('Content-Length %s on a DELETE: nothing is deleted; the server goes on', async (length) => {
    const app = (await owner.post('/api/apps', { name: `Kept ${length}` })).body as { id: string };
    const [key] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body as { id: string }[];
    const answer = await raw(
      `DELETE /api/licenses/${key!.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nContent-Length: ${length}\r\n\r\nab`,
    );
    // Closed with no answer, or answered 413: never the handler's own 200.
    expect(answer === '' || answer.startsWith('HTTP/1.1 413')).toBe(true);
    const still = await owner.get(`/api/apps/${app.id}/licenses`);
    expect((still.body.items as { id: string }[]).map((k) => k.id)).toContain(key!.id);
    expect((await fetch(`${t.base}/healthz`)).status).toBe(200);
  });

  it.each(LYING)('Content-Length %s on a write: nothing is stored', async (length) => {
    const name = `Never ${length}`;
    const body = JSON.stringify({ name });
    const answer = await raw(
      `POST /api/apps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${body}`,
    );
    expect(answer === '' || answer.startsWith('HTTP/1.1 413')).toBe(true);
    const apps = (await owner.get('/api/apps')).body as { name: string }[];
    expect(apps.map((a) => a.name)).not.toContain(name);
  });

  it('a length uWS accepts but past the route limit is a 413 before the body (signed on client routes)', async () => {
    const answer = await raw(
      `POST /api/client/init HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 6291456\r\n\r\n{}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413/);
    expect(answer).toMatch(/x-response-signature:/i);
  });
});

describe('the HTTP adapter runs no handler for a length uWS refuses', () => {
  // A route with a synchronous effect (a counter), on the platform's own server: what a handler
  // that acts before any await would do. Only the adapter's guard keeps it from running.
  let server: HttpServer;
  let base: string;
  const calls: string[] = [];
  beforeAll(async () => {
    server = createHttpServer(loadUws(), {
      log: createLogger(loadConfig({ LOG_LEVEL: 'silent' })),
      resolveIp: (p) => p,
    });
    for (const method of ['delete', 'get', 'post'] as const)
      server.mount({
        method,
        pattern: '/effect',
        bodyLimit: 1024,
        handler: (req) => {
          calls.push(`${req.method} ${req.headers['content-length'] ?? ''}`);
          return jsonReply(200, { ok: true });
        },
      });
    base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
  });
  afterAll(() => server?.stopListening());

  it.each(['delete', 'get', 'post'])('%s with each refused length: the handler never runs', async (method) => {
    calls.length = 0;
    const url = new URL(base);
    for (const length of LYING) {
      await new Promise<void>((resolve, reject) => {
        const sock = net.connect(Number(url.port), url.hostname);
        sock.on('data', () => sock.destroy());
        sock.on('close', () => resolve());
        sock.on('error', reject);
        sock.write(`${method.toUpperCase()} /effect HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\nab`);
      });
    }
    expect(calls).toEqual([]);
    // The same route with an honest length runs.
    const ok = await fetch(`${base}/effect`, { method, ...(method === 'post' ? { body: 'ab' } : {}) });
    expect(ok.status).toBe(200);
    expect(calls).toHaveLength(1);
  });
});
