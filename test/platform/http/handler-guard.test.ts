// Nothing a stranger sends ends the process (docs/protocol.md 11.23): malformed credentials are an unknown
// session on every route, SSE streams and WebSocket upgrades included; and one guard around every
// uWS callback answers whatever a handler throws synchronously, so a future parser bug cannot
// take the service down either.
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { createHttpServer, loadUws, type HttpServer } from '../../../src/platform/http/uws.js';
import { createLogger } from '../../../src/logger.js';
import { loadConfig } from '../../../src/config.js';
import { signReply } from '../../../src/platform/http/client-signing.js';
import { signingKeyFromSeed } from '../../../src/platform/crypto/index.js';
import { jsonReply } from '../../../src/platform/http/types.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

const MALFORMED = ['%', '%E0', '%E0%A4%A', '%zz', '%'.repeat(4000)];
const ID = '00000000-0000-4000-8000-000000000000';

describe('malformed credentials are an unknown session, never a crash or a 500', () => {
  it('on every dashboard route of the router table, by cookie and by bearer', async () => {
    const routes = t.server.app.router.routes.filter((r) => r.doc.auth === 'dashboard' && !r.docOnly);
    expect(routes.length).toBeGreaterThan(30);
    const seen: string[] = [];
    for (const r of routes) {
      const path = r.path.replace(/:[A-Za-z0-9_]+/g, ID);
      const method = r.method.toUpperCase();
      const body = method === 'GET' || method === 'DELETE' ? undefined : '{}';
      for (const bad of MALFORMED.slice(0, 3)) {
        // Origin names the server itself, so cookie-authenticated writes pass the cross-site check.
        const byCookie = await fetch(t.base + path, {
          method,
          body,
          headers: { cookie: `kw_session=${bad}`, origin: t.base },
        });
        const byBearer = await fetch(t.base + path, { method, body, headers: { authorization: `Bearer ${bad}` } });
        for (const res of [byCookie, byBearer]) {
          seen.push(`${method} ${path} ${res.status}`);
          expect(res.status, `${method} ${path}`).toBe(401);
          expect(await res.json()).toEqual({ detail: 'Not authenticated' });
        }
      }
    }
    expect((await fetch(`${t.base}/healthz`)).status).toBe(200);
  }, 120_000);

  it('on the SSE stream and the /api/ws upgrade', async () => {
    const f = await appFixture(t);
    for (const bad of MALFORMED) {
      const sse = await fetch(`${t.base}/api/apps/${f.app.id}/events`, { headers: { cookie: `kw_session=${bad}` } });
      expect(sse.status).toBe(401);
      const x = await fetch(`${t.base}/api/apps/x/events`, { headers: { cookie: `kw_session=${bad}` } });
      expect(x.status).toBe(401);
      const status = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${t.base.replace('http', 'ws')}/api/ws`, {
          headers: { cookie: `kw_session=${bad}`, origin: t.base },
        });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => reject(new Error('opened')));
        ws.once('error', () => undefined);
      });
      expect(status).toBe(401);
    }
    expect((await fetch(`${t.base}/healthz`)).status).toBe(200);
  });
});

describe('the guard around every uWS handler', () => {
  let server: HttpServer;
  let base: string;
  const signing = { kid: 'k1', ...signingKeyFromSeed(randomBytes(32)) };

  beforeAll(async () => {
    const log = createLogger(loadConfig({ LOG_LEVEL: 'silent' }));
    server = createHttpServer(loadUws(), {
      log,
      // A resolver that throws on purpose: it runs synchronously inside the uWS callback.
      resolveIp: (peer, xff) => {
        if (xff === 'throw') throw new TypeError('a parser bug');
        return peer;
      },
      finishError: (method, path, nonce, reply) =>
        path.startsWith('/api/client/') ? signReply(reply, signing, method, path, nonce, Date.now()) : reply,
    });
    server.mount({
      method: 'get',
      pattern: '/api/client/thing',
      bodyLimit: 0,
      handler: async () => jsonReply(200, { ok: true }),
    });
    server.mount({ method: 'get', pattern: '/plain', bodyLimit: 0, handler: async () => jsonReply(200, { ok: true }) });
    server.app.get(
      '/raw',
      server.guard.http(() => {
        throw new Error('thrown by a raw handler');
      }),
    );
    server.app.ws('/raw-ws', {
      upgrade: server.guard.upgrade(() => {
        throw new Error('thrown by an upgrade handler');
      }),
    });
    base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
  });
  afterAll(() => server?.stopListening());

  it('answers a synchronous throw with the catalogue 500, and the server goes on', async () => {
    const res = await fetch(`${base}/plain`, { headers: { 'x-forwarded-for': 'throw' } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ detail: 'Internal server error' });
    const raw = await fetch(`${base}/raw`);
    expect(raw.status).toBe(500);
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${base.replace('http', 'ws')}/raw-ws`);
      ws.once('unexpected-response', (_req, r) => resolve(r.statusCode ?? 0));
      ws.once('error', () => undefined);
    });
    expect(status).toBe(500);
    expect((await fetch(`${base}/plain`)).status).toBe(200);
  });

  it('signs the answer under /api/client/ (docs/protocol.md 4)', async () => {
    const res = await fetch(`${base}/api/client/thing`, {
      headers: { 'x-forwarded-for': 'throw', 'x-nonce': 'guard-nonce-0123456789' },
    });
    expect(res.status).toBe(500);
    const body = Buffer.from(await res.arrayBuffer());
    const ts = res.headers.get('x-response-timestamp');
    const msg = `kw1\nk1\nGET\n/api/client/thing\n500\n${ts}\nguard-nonce-0123456789\n${createHash('sha256').update(body).digest('hex')}`;
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(signing.publicKey).toString('base64url') },
      format: 'jwk',
    });
    expect(
      verify(null, Buffer.from(msg), key, Buffer.from(res.headers.get('x-response-signature') ?? '', 'base64')),
    ).toBe(true);
  });
});
