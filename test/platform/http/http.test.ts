import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;
let appId: string;

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appId = (await owner.post('/apps', { name: 'Http' })).body.id;
});
afterAll(() => t.close());

/** Sends raw bytes on a fresh socket and resolves with what the server wrote back. */
function rawExchange(
  port: number,
  payload: string,
  opts: { endAfterWrite?: boolean; destroyAfterMs?: number } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let out = '';
    sock.on('data', (d) => (out += d.toString()));
    sock.on('end', () => resolve(out));
    sock.on('close', () => resolve(out));
    sock.on('error', reject);
    sock.write(payload, () => {
      if (opts.endAfterWrite) sock.end();
      if (opts.destroyAfterMs !== undefined) setTimeout(() => sock.destroy(), opts.destroyAfterMs);
    });
  });
}

describe('HTTP layer', () => {
  it('answers health, readiness and Prometheus metrics', async () => {
    expect((await owner.get('/healthz')).body).toEqual({ status: 'ok' });
    expect((await owner.get('/readyz')).body).toMatchObject({ status: 'ready', coordination: 'local' });
    const m = await owner.get('/metrics');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toContain('text/plain');
    expect(String(m.body)).toMatch(/keywarden_http_requests_total\{route="\/healthz",method="get",status="200"\} \d+/);
  });

  it('publishes an OpenAPI 3.1 document generated from the validating schemas', async () => {
    const doc = (await owner.get('/api/openapi.json')).body;
    expect(doc.openapi).toBe('3.1.0');
    for (const p of ['/api/apps', '/apps', '/api/apps/{id}', '/apps/{id}/licenses', '/api/auth/login', '/bans/{id}'])
      expect(doc.paths).toHaveProperty([p]);
    const gen = doc.paths['/apps/{id}/licenses'].post.requestBody.content['application/json'].schema;
    expect(gen.properties.amount).toMatchObject({ type: 'integer', minimum: 1, maximum: 500 });
    expect(gen.additionalProperties).toBe(false);
  });

  it('answers 413 for bodies over 16 KiB, whether announced or streamed', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(17 * 1024) });
    const r = await owner.patch(`/apps/${appId}`, undefined, {
      rawBody: big,
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(413);
    expect(r.body).toEqual({ detail: 'Payload too large' });
    // Chunked: no Content-Length, the cap applies while reading.
    const chunk = 'x'.repeat(9000);
    const res = await rawExchange(
      t.server.port,
      `PATCH /apps/${appId} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${chunk.length.toString(16)}\r\n${chunk}\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`,
      { destroyAfterMs: 2000 },
    );
    expect(res).toMatch(/^HTTP\/1\.1 413/);
  });

  it('answers 400 for malformed JSON and 422 for JSON of the wrong shape', async () => {
    const bad = await owner.patch(`/apps/${appId}`, undefined, {
      rawBody: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ detail: 'Malformed JSON body' });
    const arr = await owner.patch(`/apps/${appId}`, [1, 2]);
    expect(arr.status).toBe(422);
    const str = await owner.post('/apps', 'just a string');
    expect(str.status).toBe(422);
  });

  it('serves 404 for unknown paths and 405 with Allow for a known path with another method (docs/protocol.md 11.20)', async () => {
    const r = await owner.get('/no/such/thing');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ detail: 'Not found' });
    const wrong = await owner.call('PUT', '/healthz', {});
    expect(wrong.status).toBe(405);
    expect(wrong.body).toEqual({ detail: 'Method not allowed' });
    expect(wrong.headers.get('allow')).toBe('GET');
    const patchable = await owner.call('PUT', '/api/apps/00000000-0000-0000-0000-000000000000', {});
    expect(patchable.headers.get('allow')).toBe('GET, PATCH, DELETE');
    expect(wrong.headers.get('x-response-signature')).toBeNull(); // dashboard routes stay unsigned
    expect((await owner.get('/api/apps/%E0%A4%A')).status).toBe(404);
  });

  it('survives clients that abort mid-body and keeps serving', async () => {
    for (let i = 0; i < 20; i++) {
      await rawExchange(
        t.server.port,
        `POST /apps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${owner.token}\r\nContent-Length: 500\r\n\r\n{"name":`,
        { destroyAfterMs: 5 },
      );
    }
    expect((await owner.get('/healthz')).status).toBe(200);
    expect((await owner.post('/apps', { name: 'after-aborts' })).status).toBe(200);
  });
});
