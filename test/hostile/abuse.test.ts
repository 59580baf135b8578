// Abuse by one activated client and the smaller hostile cases: refused beats and starts are
// budgeted and audited at most once a minute per session (docs/protocol.md 11.26); screenshots are images
// of bounded size, stored once by content and bounded per owner and in total (11.27); end-user
// names are NFC and free of control and bidirectional characters (11.28); a reseller stops with
// its admin's subscription (11.30); an upload cut short does not hold up the shutdown drain, and a
// request that arrives while shutting down gets a signed 503 with Retry-After.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

async function heartbeatSession(f: AppFixture, ip = nextIp()): Promise<{ c: ClientApi; session: string }> {
  const [key] = await f.keys(1);
  const c = f.client(ip);
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid('abuse') })).status).toBe(200);
  expect((await c.post('/api/client/heartbeat/start', { session, system_id: 'abuse-system' })).status).toBe(200);
  return { c, session };
}

const wrongBeat = (session: string, i: number) => ({
  session,
  token: `TT${'0'.repeat(32)}`,
  system_id: 'abuse-system',
  beat_index: i,
  code_hash: 'ab'.repeat(32),
  code_size: 1,
});

describe('refused beats and starts are budgeted (60 a minute per session, 600 per IP)', () => {
  it('the 61st refusal of a session is a signed 429; one audit line for all of them', async () => {
    const f = await appFixture(t);
    const { c, session } = await heartbeatSession(f);
    for (let i = 1; i <= 60; i++)
      expect((await c.post('/api/client/heartbeat', wrongBeat(session, i))).status).toBe(403);
    const limited = await c.post('/api/client/heartbeat', wrongBeat(session, 61)); // signed: ClientApi verifies
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: 'abuse-system' })).status).toBe(429);
    const lines = await f.sql(`select detail from audit_log where app_id = $1 and action = 'client.heartbeat'`, [
      f.app.id,
    ]);
    expect(lines).toHaveLength(1);
    expect(lines[0].detail).toMatch(/^403 beat refused/);
    const metrics = await fetch(`${t.base}/metrics`).then((r) => r.text());
    expect(Number(/^keywarden_heartbeat_refusals_unaudited_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(
      61,
    );
    // Another session of the same address is not held back by this one.
    const other = await heartbeatSession(f, c.extraHeaders['x-forwarded-for']);
    expect((await other.c.post('/api/client/heartbeat', wrongBeat(other.session, 1))).status).toBe(403);
  });

  it('an address with 600 refusals this minute gets 429 on every session', async () => {
    const f = await appFixture(t);
    const ip = nextIp();
    const sessions = [];
    for (let i = 0; i < 11; i++) sessions.push(await heartbeatSession(f, ip));
    let refused = 0;
    for (const s of sessions.slice(0, 10)) {
      await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          if ((await s.c.post('/api/client/heartbeat', wrongBeat(s.session, i + 1))).status === 403) refused++;
        }),
      );
    }
    expect(refused).toBe(600);
    const last = sessions[10]!;
    expect((await last.c.post('/api/client/heartbeat', wrongBeat(last.session, 1))).status).toBe(429);
  }, 60_000);

  it('calls for unknown sessions count against the address (docs/protocol.md 11.39): 1,000 starts, 600 x 401, then 429', async () => {
    const f = await appFixture(t);
    const c = f.client(nextIp());
    const real = await f.session(c); // a real session's token, altered: unknown, same shape
    const statuses: number[] = [];
    for (let round = 0; round < 10; round++) {
      statuses.push(
        ...(await Promise.all(
          Array.from({ length: 100 }, async (_, i) => {
            const session = `${real.slice(0, -6)}${String(round * 100 + i).padStart(6, '0')}`;
            const r = await c.post('/api/client/heartbeat/start', { session, system_id: 'abuse-system' });
            return r.status;
          }),
        )),
      );
    }
    // 600 a minute; a round in flight when the budget runs out may finish (the budget is read, not reserved).
    const unknown = statuses.filter((s) => s === 401).length;
    expect(unknown).toBeGreaterThanOrEqual(600);
    expect(unknown).toBeLessThanOrEqual(700);
    expect(statuses.slice(700).every((s) => s === 429)).toBe(true);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    // Signed (ClientApi verifies), with Retry-After, and beats of the same address are held back too.
    const limited = await c.post('/api/client/heartbeat', wrongBeat(real, 1));
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  }, 60_000);
});

/** A tiny valid PNG header followed by `size` bytes of `fill`: a distinct image per fill. */
function png(size: number, fill = 0): string {
  const head = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([head, Buffer.alloc(size - head.length, fill)]).toString('base64');
}

describe('screenshots', () => {
  async function activate(f: AppFixture, key: string, screenshot: string) {
    const c = f.client();
    const session = await f.session(c);
    return c.post('/api/client/license', { session, license: key, hwid: hwid('shot'), screenshot });
  }
  const files = (appId: string) => {
    const dir = path.join(t.dataDir, 'screenshots', appId);
    return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  };

  it('refuses what is not a PNG, JPEG or WebP image, and images over 3 MiB', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    for (const bad of [Buffer.from('GIF89a-not-allowed').toString('base64'), Buffer.alloc(64, 7).toString('base64')]) {
      const r = await activate(f, key!, bad);
      expect(r.status).toBe(422);
      expect(r.body.detail[0]).toMatchObject({ loc: ['body', 'screenshot'] });
    }
    expect((await activate(f, key!, png(3 * 1024 * 1024 + 1))).status).toBe(422);
    // A 3 MiB image fits the 5 MiB body of calls carrying one.
    expect((await activate(f, key!, png(3 * 1024 * 1024))).status).toBe(200);
    expect(files(f.app.id)).toHaveLength(1);
  });

  it('stores an identical image once, and keeps the newest 20 of a key', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    for (let i = 0; i < 5; i++) expect((await activate(f, key!, png(2048, 1))).status).toBe(200);
    expect(files(f.app.id)).toHaveLength(1);
    for (let i = 2; i <= 25; i++) expect((await activate(f, key!, png(2048, i))).status).toBe(200);
    expect(files(f.app.id)).toHaveLength(20);
    const kept = await f.sql('select count(*)::int as n from screenshots where app_id = $1', [f.app.id]);
    expect(kept[0].n).toBe(20);
  }, 60_000);

  it('bounds the whole store by SCREENSHOT_STORE_MB, removing the oldest images first', async () => {
    const small = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', SCREENSHOT_STORE_MB: '1' });
    try {
      const f = await appFixture(small);
      const keys = await f.keys(3);
      const dir = path.join(small.dataDir, 'screenshots', f.app.id);
      const sent: string[] = [];
      for (const [i, key] of keys.entries()) {
        const c = f.client();
        const session = await f.session(c);
        const r = await c.post('/api/client/license', {
          session,
          license: key,
          hwid: hwid(`bound${i}`),
          screenshot: png(400 * 1024, 50 + i),
        });
        expect(r.status).toBe(200);
        sent.push(fs.readdirSync(dir).sort().join(','));
      }
      const left = fs.readdirSync(dir);
      expect(left).toHaveLength(2);
      const bytes = left.reduce((n, name) => n + fs.statSync(path.join(dir, name)).size, 0);
      expect(bytes).toBeLessThanOrEqual(1024 * 1024);
      // The first image is the one that went.
      expect(sent[0]!.split(',').some((name) => left.includes(name))).toBe(false);
    } finally {
      await small.close();
    }
  }, 60_000);
});

describe('end-user names', () => {
  it('are one name after NFC, and refuse control and bidirectional characters', async () => {
    const f = await appFixture(t);
    const [k1, k2] = await f.keys(2);
    const composed = '\u00C5sa';
    const decomposed = 'A\u030Asa';
    const c = f.client();
    let session = await f.session(c);
    expect(
      (
        await c.post('/api/client/register', {
          session,
          username: composed,
          password: 'name-pass-1',
          license: k1,
          hwid: hwid('nfc'),
        })
      ).status,
    ).toBe(200);
    session = await f.session(c);
    const dup = await c.post('/api/client/register', {
      session,
      username: decomposed,
      password: 'name-pass-1',
      license: k2,
      hwid: hwid('nfc'),
    });
    expect(dup.status).toBe(400);
    expect(dup.body.detail).toBe('Username already taken');
    session = await f.session(c);
    expect(
      (await c.post('/api/client/login', { session, username: decomposed, password: 'name-pass-1', hwid: hwid('nfc') }))
        .status,
    ).toBe(200);
    for (const bad of ['evil\u202Egnp.exe', 'bell\u0007', 'iso\u2066late', 'mark\u200F']) {
      session = await f.session(c);
      const r = await c.post('/api/client/register', {
        session,
        username: bad,
        password: 'name-pass-1',
        license: k2,
        hwid: hwid('nfc'),
      });
      expect(r.status, bad).toBe(422);
      expect(r.body.detail[0]).toMatchObject({ loc: ['body', 'username'], type: 'value_error' });
    }
    const stored = await f.sql('select username from end_users where app_id = $1', [f.app.id]);
    expect(stored.map((u: { username: string }) => u.username)).toEqual([composed]);
  });
});

describe("subscriptions bind an admin's whole subtree", () => {
  it('a reseller under an admin whose subscription ended is refused like the admin, until it is renewed', async () => {
    const f = await appFixture(t);
    const admin = await f.owner.post('/api/team', {
      username: 'subadmin',
      password: 'admin-pass-12',
      role: 'admin',
      allowed_apps: [f.app.id],
    });
    expect(admin.status).toBe(200);
    const adminApi = await new Api(t.base).signIn('subadmin', 'admin-pass-12');
    expect(
      (await adminApi.post('/api/team', { username: 'subseller', password: 'seller-pass-1', allowed_apps: [f.app.id] }))
        .status,
    ).toBe(200);
    const seller = await new Api(t.base).signIn('subseller', 'seller-pass-1');
    expect((await seller.get('/api/apps')).status).toBe(200);
    expect((await f.owner.patch(`/api/team/${admin.body.id}/subscription`, { expires_at: '2020-01-01' })).status).toBe(
      200,
    );
    for (const who of [adminApi, seller]) {
      const r = await who.get('/api/apps');
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ detail: 'Subscription expired' });
    }
    expect((await f.owner.patch(`/api/team/${admin.body.id}/subscription`, { clear: true })).status).toBe(200);
    expect((await seller.get('/api/apps')).status).toBe(200);
  });
});

/** Waits until the server is reading or answering `n` requests (a condition polled, not a fixed time). */
async function inflight(s: TestServer, n: number): Promise<void> {
  while (s.server.app.server.inflight !== n) await new Promise((r) => setTimeout(r, 5));
}

describe('the shutdown drain', () => {
  it('an upload cut short does not hold up the drain; a request while shutting down gets a signed 503', async () => {
    const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '60000' });
    const url = new URL(s.base);
    // 1. An upload announced at 1,000 bytes that stops after 10 and is cut off.
    const sock = net.connect(Number(url.port), url.hostname);
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.write(
      'POST /api/client/init HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"api_key":',
    );
    await inflight(s, 1);
    sock.destroy();
    expect(await s.server.app.server.drain(30_000)).toBe(true);

    // 2. A keep-alive connection held open, and an upload still in flight when the shutdown starts.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (p: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
        http
          .get({ host: url.hostname, port: url.port, path: p, agent, headers }, (res) => {
            let body = '';
            res.on('data', (d: Buffer) => {
              body += d.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
          })
          .on('error', reject);
      });
    expect((await get('/healthz')).status).toBe(200);
    const slow = net.connect(Number(url.port), url.hostname);
    await new Promise<void>((r) => slow.once('connect', () => r()));
    slow.write(
      'POST /api/client/init HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    await inflight(s, 1);
    const stopping = s.close();
    await new Promise((r) => setImmediate(r));
    const during = await get('/api/client/keys', { 'x-nonce': 'shutdown-nonce-0123456789' });
    expect(during.status).toBe(503);
    expect(Number(during.headers['retry-after'])).toBeGreaterThan(0);
    expect(during.headers['x-response-signature']).toBeTruthy();
    slow.destroy();
    await stopping;
    agent.destroy();
  });
});
