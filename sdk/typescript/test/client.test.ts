// The SDK against the real server, and against a fake server sending forged, replayed, stale
// and unsigned responses, which it must refuse.
import http from 'node:http';
import { createHash, createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeywardenClient, KeywardenError, ResponseVerificationError, type Heartbeat } from '../src/index.js';
import { startTestServer, type TestServer } from '../../../test/helpers/server.js';
import { appFixture } from '../../../test/helpers/fixture.js';

let t: TestServer;
let publicKeys: Record<string, string>;
beforeAll(async () => {
  t = await startTestServer();
  const keys = (await (await fetch(`${t.base}/api/client/keys`)).json()) as { keys: { kid: string; public_key: string }[] };
  publicKeys = Object.fromEntries(keys.keys.map((k) => [k.kid, k.public_key]));
});
afterAll(() => t.close());

const HWID = 'sdk-device-0001';

describe('against the server', () => {
  it('init, register (then login), login, license, with typed errors', async () => {
    const f = await appFixture(t);
    const [k1, k2] = await f.keys(2, { level: 2 });
    const c = new KeywardenClient({ baseUrl: t.base, apiKey: f.app.api_key, publicKeys });
    const init = await c.init();
    expect(init.app.name).toBe(f.app.name);
    const reg = await c.register({ username: 'sdkuser', password: 'sdk-pass-1', license: k1!, hwid: HWID });
    expect(reg.user).toMatchObject({ username: 'sdkuser', level: 2 });
    // register logged in at once: last_login is set
    expect((await f.sql(`select last_login from end_users where username = 'sdkuser'`))[0].last_login).not.toBeNull();
    await expect(c.login({ username: 'sdkuser', password: 'wrong-pass', hwid: HWID })).rejects.toMatchObject({ status: 401, detail: 'Invalid username or password' });
    await expect(c.license({ license: 'NOPE', hwid: HWID })).rejects.toBeInstanceOf(KeywardenError);
    expect((await c.license({ license: k2!, hwid: HWID })).level).toBe(2);
  });

  it('signs requests with apiSecret and decrypts responses with encKey', async () => {
    const f = await appFixture(t, { require_signature: true, force_encryption: true });
    const [key] = await f.keys(1);
    const unsigned = new KeywardenClient({ baseUrl: t.base, apiKey: f.app.api_key, publicKeys, encKey: 'sdk-enc' });
    await expect(unsigned.init()).rejects.toMatchObject({ status: 401, detail: 'Invalid request signature' });
    const c = new KeywardenClient({ baseUrl: t.base, apiKey: f.app.api_key, apiSecret: f.app.api_secret, publicKeys, encKey: 'sdk-enc' });
    expect((await c.init()).session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await c.license({ license: key!, hwid: HWID })).success).toBe(true);
  });

  it('runs a heartbeat loop with increasing beat_index, verified proofs, and a clean stop', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = new KeywardenClient({ baseUrl: t.base, apiKey: f.app.api_key, publicKeys });
    await c.init();
    await c.license({ license: key!, hwid: HWID });
    const hb = await c.startHeartbeat({ systemId: 'sdk-system-01', codeHash: 'abcdef0123456789', intervalMs: 10 });
    const counts: number[] = [];
    await new Promise<void>((resolve, reject) => {
      hb.on('beat', (b: { beatCount: number }) => {
        counts.push(b.beatCount);
        if (counts.length === 3) resolve();
      });
      hb.on('error', reject);
    });
    await hb.stop();
    expect(counts).toEqual([1, 2, 3]);
    const live = t.server.app.domain.heartbeats.host.peek(c.session!);
    expect(live).toBeUndefined(); // stopped on the server
  });

  it('stops and reports when the server kills the session', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const c = new KeywardenClient({ baseUrl: t.base, apiKey: f.app.api_key, publicKeys });
    await c.init();
    await c.license({ license: key!, hwid: HWID });
    const hb: Heartbeat = await c.startHeartbeat({ systemId: 'sdk-system-01', codeHash: 'abcdef0123456789', intervalMs: 10, debuggerDetected: () => true });
    const err = await new Promise<unknown>((resolve) => hb.on('error', resolve));
    expect(err).toMatchObject({ status: 403, detail: 'rejected' });
  });
});

describe('against a fake server', () => {
  const real = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');
  const pub = (k: typeof real) => Buffer.from(k.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64');
  let server: http.Server;
  let base: string;
  /** What the fake answers next. */
  let mode = 'good';
  let captured: { headers: Record<string, string>; body: string } | undefined;

  const signed = (path: string, status: number, body: string, nonce: string, o: { key?: typeof real; kid?: string; ts?: number } = {}) => {
    const ts = String(o.ts ?? Math.floor(Date.now() / 1000));
    const kid = o.kid ?? 'k1';
    const msg = `kw1\n${kid}\nPOST\n${path}\n${status}\n${ts}\n${nonce}\n${createHash('sha256').update(body).digest('hex')}`;
    return { 'x-response-kid': kid, 'x-response-timestamp': ts, 'x-response-signature': sign(null, Buffer.from(msg), (o.key ?? real).privateKey).toString('base64') };
  };

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const nonce = String(req.headers['x-nonce'] ?? '');
        const path = req.url!;
        const reply = (payload: unknown, headers: Record<string, string>) => {
          res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(typeof payload === 'string' ? payload : JSON.stringify(payload));
        };
        if (path === '/api/client/heartbeat/start') {
          const token = 'TT' + 'a'.repeat(32);
          const session = JSON.parse(body).session as string;
          const proof = mode === 'forged-proof' ? 'AAAA' : createHmac('sha256', session).update(`kwhs1\nsys-0001\n${token}`).digest('base64');
          const b = JSON.stringify({ success: true, token, beat_interval: 5, proof });
          return reply(b, signed(path, 200, b, nonce));
        }
        const b = JSON.stringify({ success: true, session: 'S'.repeat(43), app: { name: 'fake', version: '1.0', hwid_lock: false } });
        switch (mode) {
          case 'unsigned': return reply(b, {});
          case 'unknown-kid': return reply(b, signed(path, 200, b, nonce, { kid: 'k9' }));
          case 'bad-base64': return reply(b, { ...signed(path, 200, b, nonce), 'x-response-signature': '%%%not-base64%%%' });
          case 'forged': return reply(b, signed(path, 200, b, nonce, { key: other }));
          case 'stale': return reply(b, signed(path, 200, b, nonce, { ts: Math.floor(Date.now() / 1000) - 301 }));
          case 'tampered': return reply(b.replace('fake', 'evil'), signed(path, 200, b, nonce));
          case 'replay':
            if (!captured) {
              const h = signed(path, 200, b, nonce);
              captured = { headers: h, body: b };
              return reply(b, h);
            }
            return reply(captured.body, captured.headers); // a genuine response to an earlier request
          default: return reply(b, signed(path, 200, b, nonce));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const client = () => new KeywardenClient({ baseUrl: base, apiKey: 'x', publicKeys: { k1: pub(real) } });

  it('accepts a genuine response', async () => {
    mode = 'good';
    expect((await client().init()).app.name).toBe('fake');
  });

  it.each([
    ['unsigned', 'unsigned'], ['unknown-kid', 'unknown_kid'], ['bad-base64', 'bad_signature_encoding'], ['forged', 'bad_signature'],
    ['stale', 'stale'], ['tampered', 'bad_signature'],
  ])('refuses a %s response', async (m, reason) => {
    mode = m;
    const err = await client().init().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResponseVerificationError);
    expect((err as ResponseVerificationError).reason).toBe(reason);
  });

  it('refuses a response replayed from another request (foreign nonce)', async () => {
    mode = 'replay';
    captured = undefined;
    await client().init(); // genuine, captured
    const err = await client().init().catch((e: unknown) => e);
    expect((err as ResponseVerificationError).reason).toBe('bad_signature');
  });

  it('refuses a heartbeat token whose proof does not verify', async () => {
    mode = 'forged-proof';
    const c = client();
    c.session = 'S'.repeat(43);
    const err = await c.startHeartbeat({ systemId: 'sys-0001', codeHash: 'abcdef01' }).catch((e: unknown) => e);
    expect((err as ResponseVerificationError).reason).toBe('proof');
  });
});
