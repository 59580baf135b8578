// The SDK against a fake server that signs like the real one but can forge, replay, go stale,
// hang or send garbage: every such answer must end as a typed KeywardenError, never a crash.
// (The full flow against the real server is test/sdk/typescript.test.ts, through the harness.)
import http from 'node:http';
import net from 'node:net';
import { createHash, createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, KeywardenError, TransportError, type KeywardenConfig, type Transport } from '../src/index.js';

const real = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const pub = (k: typeof real) => Buffer.from(k.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64');

let server: http.Server;
let base: string;
/** What the fake answers next. */
let mode = 'good';
/** Seconds added to the fake's clock. */
let serverSkew = 0;
let captured: { headers: Record<string, string>; body: string } | undefined;
let requests = 0;

const signed = (
  path: string,
  status: number,
  body: string,
  nonce: string,
  o: { key?: typeof real; kid?: string; ts?: number } = {},
) => {
  const ts = String(o.ts ?? Math.floor(Date.now() / 1000) + serverSkew);
  const kid = o.kid ?? 'k1';
  const msg = `kw1\n${kid}\nPOST\n${path}\n${status}\n${ts}\n${nonce}\n${createHash('sha256').update(body).digest('hex')}`;
  return {
    'x-response-kid': kid,
    'x-response-timestamp': ts,
    'x-response-signature': sign(null, Buffer.from(msg), (o.key ?? real).privateKey).toString('base64'),
  };
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      requests++;
      const nonce = String(req.headers['x-nonce'] ?? '');
      const path = req.url!;
      const reply = (payload: string, headers: Record<string, string>, status = 200) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(payload);
      };
      if (mode === 'hang') return; // never answers
      if (path === '/api/client/heartbeat/start') {
        const token = 'TT' + 'a'.repeat(32);
        const session = JSON.parse(body).session as string;
        const proof =
          mode === 'forged-proof'
            ? Buffer.alloc(32).toString('base64')
            : createHmac('sha256', session).update(`kwhs1\nsys-0001\n${token}`).digest('base64');
        const b = JSON.stringify({ success: true, token, beat_interval: 5, proof });
        return reply(b, signed(path, 200, b, nonce));
      }
      const b = JSON.stringify({
        success: true,
        session: 'S'.repeat(43),
        app: { name: 'fake', version: '1.0', hwid_lock: false },
      });
      switch (mode) {
        case 'unsigned':
          return reply(b, {});
        case 'unknown-kid':
          return reply(b, signed(path, 200, b, nonce, { kid: 'k9' }));
        case 'bad-base64':
          return reply(b, { ...signed(path, 200, b, nonce), 'x-response-signature': '%%%not-base64%%%' });
        case 'forged':
          return reply(b, signed(path, 200, b, nonce, { key: other }));
        case 'stale':
          return reply(b, signed(path, 200, b, nonce, { ts: Math.floor(Date.now() / 1000) - 1000 }));
        case 'tampered':
          return reply(b.replace('fake', 'evil'), signed(path, 200, b, nonce));
        case 'not-json':
          return reply('<html>oops</html>', signed(path, 200, '<html>oops</html>', nonce));
        case 'huge': {
          const h = 'x'.repeat(2 << 20);
          return reply(h, signed(path, 200, h, nonce));
        }
        case 'no-session': {
          const x = '{"success":true}';
          return reply(x, signed(path, 200, x, nonce));
        }
        case 'ratelimit': {
          const x = '{"detail":"Rate limit exceeded"}';
          return reply(x, { ...signed(path, 429, x, nonce), 'retry-after': '42' }, 429);
        }
        case 'replay':
          if (!captured) {
            const h = signed(path, 200, b, nonce);
            captured = { headers: h, body: b };
            return reply(b, h);
          }
          return reply(captured.body, captured.headers); // a genuine answer to an earlier request
        default:
          return reply(b, signed(path, 200, b, nonce));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});
afterAll(
  () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    }),
);

const config = (url = base): KeywardenConfig => ({
  format: 1,
  base_url: url,
  api_key: 'kwpk_fake',
  version: '1.0',
  response_keys: [{ kid: 'k1', alg: 'Ed25519', public_key: pub(real) }],
});
const client = (o: Parameters<typeof Client.fromConfig>[1] = {}) => Client.fromConfig(config(), o);
const failure = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(KeywardenError);
  return e as KeywardenError;
};

describe('against a fake server', () => {
  it('accepts a genuine answer', async () => {
    mode = 'good';
    serverSkew = 0;
    expect(await client().init()).toMatchObject({ name: 'fake', session: 'S'.repeat(43) });
  });

  it.each([
    ['unsigned', 'unsigned'],
    ['unknown-kid', 'unknown_kid'],
    ['bad-base64', 'bad_base64'],
    ['forged', 'bad_signature'],
    ['stale', 'stale'],
    ['tampered', 'bad_signature'],
    ['not-json', 'malformed'],
    ['no-session', 'malformed'],
  ])('refuses a %s answer', async (m, reason) => {
    mode = m;
    serverSkew = 0;
    expect(await failure(client().init())).toMatchObject({ code: 'verification', reason });
  });

  it('refuses an answer replayed from another request (foreign nonce)', async () => {
    mode = 'replay';
    captured = undefined;
    await client().init(); // genuine, captured
    expect(await failure(client().init())).toMatchObject({ code: 'verification', reason: 'bad_signature' });
  });

  it('refuses a heartbeat token whose proof does not verify', async () => {
    mode = 'good';
    const c = client();
    await c.init();
    mode = 'forged-proof';
    expect(await failure(c.startHeartbeat('sys-0001', 'abcdef01'))).toMatchObject({
      code: 'verification',
      reason: 'bad_proof',
    });
  });

  it('learns the server clock from the first answer, then holds later answers to it', async () => {
    mode = 'good';
    serverSkew = 420; // the local clock is 7 minutes behind the server
    const c = client();
    await c.init();
    expect(Math.abs(c.clockOffsetMs! - 420_000)).toBeLessThan(2000);
    await c.init();
    serverSkew = 0; // an answer stamped with the local clock is now 420 s off the server's time
    expect(await failure(c.init())).toMatchObject({ code: 'verification', reason: 'stale' });
    serverSkew = 0;
  });

  it('maps a 429 with Retry-After', async () => {
    mode = 'ratelimit';
    expect(await failure(client().init())).toMatchObject({ code: 'rate_limited', status: 429, retryAfter: 42 });
  });

  it('times out on a hung server', async () => {
    mode = 'hang';
    const e = await failure(client({ timeoutMs: 200, retries: 0 }).init());
    expect(e.code).toBe('timeout');
    mode = 'good';
  });

  it('refuses an oversized answer as a network error', async () => {
    mode = 'huge';
    expect((await failure(client({ retries: 0 }).init())).code).toBe('network');
    mode = 'good';
  });

  it('retries a call that never reached the server, then reports network', async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    let attempts = 0;
    const { defaultTransport } = await import('../src/index.js');
    const t = defaultTransport();
    const counting: Transport = (req) => {
      attempts++;
      return t(req);
    };
    const c = Client.fromConfig(config(`http://127.0.0.1:${closed}`), { transport: counting, retries: 2 });
    const e = await failure(c.init());
    expect(e).toMatchObject({ code: 'network', notSent: true });
    expect(attempts).toBe(3);
  });

  it('does not resend a request that may have reached the server', async () => {
    mode = 'hang';
    const before = requests;
    const e = await failure(client({ timeoutMs: 200, retries: 3 }).init());
    expect(e).toMatchObject({ code: 'timeout', notSent: false });
    await new Promise((r) => setTimeout(r, 50));
    expect(requests - before).toBe(1);
    mode = 'good';
  });

  it('drops the route after a 502/503/504, signed or not, a timeout or a connection error', async () => {
    // Each step: what the transport does with the next call; `sent` records the route each call carried.
    const sent: (string | undefined)[] = [];
    type Step = (req: Parameters<Transport>[0]) => Awaited<ReturnType<Transport>>;
    const answer =
      (status: number, route: string | undefined, sign = true): Step =>
      (req) => {
        const path = new URL(req.url).pathname;
        const b =
          status === 200
            ? JSON.stringify({ success: true, session: 'S'.repeat(43), app: { name: 'fake' } })
            : '{"detail":"x"}';
        return {
          status,
          headers: {
            'content-type': 'application/json',
            ...(sign ? signed(path, status, b, req.headers['x-nonce']!) : {}),
            ...(route ? { 'x-keywarden-route': route } : {}),
          },
          body: Buffer.from(b),
        };
      };
    const fail =
      (kind: 'timeout' | 'network'): Step =>
      () => {
        throw new TransportError(kind, true, kind);
      };
    const steps: Step[] = [
      answer(200, 'a-0'), // init: the answer names the owner
      answer(503, 'a-0'), // a signed 503: dropped, even though it names one
      answer(401, 'b-1'),
      answer(502, undefined, false), // a balancer's own 502
      answer(401, 'b-1'),
      answer(504, 'b-1'),
      answer(401, 'b-0'),
      fail('timeout'),
      answer(401, 'b-1'),
      fail('network'), // a connection reset after the request left
      answer(401, 'b-0'),
      answer(401, undefined),
    ];
    const c = Client.fromConfig(config(), {
      retries: 0,
      transport: async (req) => {
        sent.push(req.headers['x-keywarden-route']);
        return steps.shift()!(req);
      },
    });
    await c.init();
    while (steps.length > 0) await c.call('/license', { session: c.session }).catch(() => undefined);
    expect(sent).toEqual([
      undefined,
      'a-0',
      undefined,
      'b-1',
      undefined,
      'b-1',
      undefined,
      'b-0',
      undefined,
      'b-1',
      undefined,
      'b-0',
    ]);
  });

  it('turns a throwing custom transport into a network error', async () => {
    const c = Client.fromConfig(config(), {
      transport: () => {
        throw new Error('boom');
      },
      retries: 0,
    });
    expect((await failure(c.init())).code).toBe('network');
  });

  it('goes through an http proxy when told to', async () => {
    mode = 'good';
    const seen: string[] = [];
    const proxy = http.createServer((req, res) => {
      seen.push(req.url!);
      const u = new URL(req.url!);
      const up = http.request(
        { host: u.hostname, port: u.port, path: u.pathname, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode!, r.headers);
          r.pipe(res);
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const c = client({ proxy: `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}` });
      expect((await c.init()).name).toBe('fake');
      expect(seen).toEqual([`${base}/api/client/init`]);
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });

  it('a heartbeat listener that throws does not end the loop or crash the host', async () => {
    mode = 'good';
    const c = client();
    await c.init();
    // the fake answers every beat with the init body: a malformed beat answer -> degraded, never a throw
    const hb = await c.startHeartbeat('sys-0001', 'abcdef01', { intervalMs: 10, debuggerDetected: () => false });
    let degraded = 0;
    hb.on('degraded', () => {
      degraded++;
      throw new Error('listener bug');
    });
    await new Promise<void>((resolve) => {
      const i = setInterval(() => {
        if (degraded >= 2) {
          clearInterval(i);
          resolve();
        }
      }, 5);
    });
    expect(hb.running).toBe(true);
    await hb.stop();
    expect(hb.running).toBe(false);
  });

  it('refuses a config it cannot use', () => {
    expect(() => Client.fromConfig({ ...config(), format: 2 } as never)).toThrow(/format/);
    expect(() =>
      Client.fromConfig({ ...config(), response_keys: [{ kid: 'k1', alg: 'Ed25519', public_key: 'AAAA' }] }),
    ).toThrow(/32 bytes/);
    expect(() => Client.fromConfig('/nonexistent/keywarden.json')).toThrow(/cannot read/);
  });
});
