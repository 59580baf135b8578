// Live streams follow access as it changes (docs/protocol.md 11.24): a reseller's /api/ws socket and SSE
// stream stop showing what it may no longer see, and are closed when its session, account or
// app goes away; a cookie-authenticated upgrade needs the dashboard's own Origin; subscribing
// twice is one subscription. The streams' periodic re-check runs every 15 s, so each wait below
// (at most 8 s) can only succeed through the signal the change itself sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

const WAIT_MS = 8_000;

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

/** An SSE reader: collects `event:` blocks and resolves `ended` when the server ends the stream. */
class SseReader {
  readonly blocks: { event: string; data: any }[] = [];
  readonly ended: Promise<void>;
  private waiters: { match: (b: { event: string; data: any }) => boolean; resolve: (b: any) => void }[] = [];
  private constructor(
    readonly status: number,
    body: ReadableStream<Uint8Array> | null,
  ) {
    this.ended = (async () => {
      if (!body) return;
      const reader = body.getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        buf += new TextDecoder().decode(value);
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (!event || !data) continue;
          const b = { event, data: JSON.parse(data) };
          this.blocks.push(b);
          this.waiters = this.waiters.filter((w) => (w.match(b) ? (w.resolve(b), false) : true));
        }
      }
    })();
  }

  static async open(base: string, appId: string, token: string): Promise<SseReader> {
    const res = await fetch(`${base}/api/apps/${appId}/events`, { headers: { authorization: `Bearer ${token}` } });
    return new SseReader(res.status, res.body);
  }

  next(match: (b: { event: string; data: any }) => boolean): Promise<{ event: string; data: any }> {
    const seen = this.blocks.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }
}

function within<T>(p: Promise<T>, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`not within ${WAIT_MS} ms: ${what}`)), WAIT_MS).unref(),
    ),
  ]);
}

let sellerSeq = 0;
interface Seller {
  f: AppFixture;
  id: string;
  username: string;
  api: Api;
  key: string;
  /** Activates the seller's key from a fresh session: one client.license event. */
  activate(): Promise<void>;
}

async function seller(perms: Record<string, boolean> = {}): Promise<Seller> {
  const f = await appFixture(t);
  const username = `accseller${++sellerSeq}`;
  const permissions = { generate_keys: true, view_keys: true, view_hwid: true, view_ip: true, ...perms };
  const r = await f.owner.post('/api/team', {
    username,
    password: 'seller-pass-1',
    allowed_apps: [f.app.id],
    permissions,
  });
  expect(r.status).toBe(200);
  const api = await new Api(t.base).signIn(username, 'seller-pass-1');
  const key = (await api.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 3 })).body[0].key as string;
  return {
    f,
    id: r.body.id,
    username,
    api,
    key,
    async activate() {
      const c = f.client('203.0.113.77');
      const session = await f.session(c);
      const a = await c.post('/api/client/license', { session, license: key, hwid: hwid('access') });
      expect(a.status).toBe(200);
    },
  };
}

describe('live streams follow access', () => {
  it('a revoked view_hwid / view_ip permission hides hwid and ip from the next events of socket and stream', async () => {
    const s = await seller();
    const ws = await Subscriber.open(t.base, s.api.token);
    expect(await ws.subscribe(s.f.app.id)).toMatchObject({ type: 'subscribed' });
    const sse = await SseReader.open(t.base, s.f.app.id, s.api.token!);
    expect(sse.status).toBe(200);
    await s.activate();
    expect((await ws.next((x) => x.event?.kind === 'client.license')).event.data).toMatchObject({
      hwid: hwid('access'),
      ip: '203.0.113.77',
    });
    expect((await sse.next((b) => b.event === 'client.license')).data.data).toHaveProperty('hwid');

    const p = await s.f.owner.patch(`/api/team/${s.id}/permissions`, {
      permissions: { generate_keys: true, view_keys: true },
    });
    expect(p.status).toBe(200);
    // The re-check is asynchronous: activate until an event arrives without the hidden fields.
    const hidden = (async () => {
      for (let i = 0; ; i++) {
        await s.activate();
        const seen = ws.events('client.license');
        const last = seen[seen.length - 1]?.event.data;
        if (seen.length >= i + 2 && last && !('hwid' in last)) return last;
      }
    })();
    const data = await within(hidden, 'hwid hidden after the permission was revoked');
    expect(data).not.toHaveProperty('ip');
    const sseLast = await within(
      sse.next((b) => b.event === 'client.license' && !('hwid' in b.data.data)),
      'SSE hides hwid',
    );
    expect(sseLast.data.data).not.toHaveProperty('ip');
    ws.close();
  });

  it('a disabled account: its socket and stream are closed', async () => {
    const s = await seller();
    const ws = await Subscriber.open(t.base, s.api.token);
    await ws.subscribe(s.f.app.id);
    const sse = await SseReader.open(t.base, s.f.app.id, s.api.token!);
    expect((await s.f.owner.patch(`/api/team/${s.id}`, { enabled: false })).status).toBe(200);
    expect((await within(ws.closed, 'socket closed')).code).toBe(1008);
    await within(sse.ended, 'SSE stream ended');
    expect(sse.blocks.map((b) => b.event)).toContain('closed');
  });

  it('a deleted account: its socket is closed', async () => {
    const s = await seller();
    const ws = await Subscriber.open(t.base, s.api.token);
    await ws.subscribe(s.f.app.id);
    expect((await s.f.owner.delete(`/api/team/${s.id}`)).status).toBe(200);
    expect((await within(ws.closed, 'socket closed')).code).toBe(1008);
  });

  it('an app taken away from the reseller: nothing of it reaches the socket any more', async () => {
    const s = await seller();
    const ws = await Subscriber.open(t.base, s.api.token);
    await ws.subscribe(s.f.app.id);
    expect((await s.f.owner.patch(`/api/team/${s.id}/apps`, { allowed_apps: [] })).status).toBe(200);
    await within(ws.closed, 'socket closed (the change revoked its sessions)');
    await s.activate();
    expect(ws.events('client.license')).toEqual([]);
  });

  it('signing out closes the streams of that session; other sessions keep theirs', async () => {
    const s = await seller();
    const other = await new Api(t.base).signIn(s.username, 'seller-pass-1');
    const ws = await Subscriber.open(t.base, s.api.token);
    await ws.subscribe(s.f.app.id);
    const kept = await Subscriber.open(t.base, other.token);
    await kept.subscribe(s.f.app.id);
    expect((await s.api.post('/api/auth/logout')).status).toBe(200);
    expect((await within(ws.closed, 'socket closed')).code).toBe(1008);
    await s.activate();
    await within(
      kept.next((x) => x.event?.kind === 'client.license'),
      'the other session still receives',
    );
    kept.close();
  });

  it('a deleted app is dropped from an owner socket, whose other app goes on', async () => {
    const f = await appFixture(t);
    const second = (await f.owner.post('/apps', { name: 'Second live app' })).body;
    const ws = await Subscriber.open(t.base, f.owner.token);
    await ws.subscribe(f.app.id);
    await ws.subscribe(second.id);
    expect((await f.owner.delete(`/api/apps/${second.id}`)).status).toBe(200);
    expect(
      await within(
        ws.next((x) => x.type === 'unsubscribed'),
        'unsubscribed frame',
      ),
    ).toMatchObject({ app_id: second.id, detail: 'Application not found' });
    await f.keys(1);
    expect(
      (
        await within(
          ws.next((x) => x.event?.kind === 'license.generate'),
          'events of the other app',
        )
      ).event.app_id,
    ).toBe(f.app.id);
    ws.close();
  });
});

describe('the upgrade and the subscriptions', () => {
  async function cookieUpgrade(origin: string | undefined, cookie: string): Promise<Subscriber | Error> {
    const headers: Record<string, string> = { cookie };
    if (origin) headers.origin = origin;
    return Subscriber.open(t.base, undefined, undefined, headers).catch((e: Error) => e);
  }

  it('a cookie-authenticated upgrade from another origin (or none) is refused with 403; from its own origin it opens', async () => {
    const f = await appFixture(t);
    const cookie = `kw_session=${f.owner.token}`;
    expect(String(await cookieUpgrade('http://evil.example', cookie))).toMatch(/403 .*Cross-site request refused/);
    expect(String(await cookieUpgrade(undefined, cookie))).toMatch(/403/);
    const own = await cookieUpgrade(t.base, cookie);
    expect(own).toBeInstanceOf(Subscriber);
    (own as Subscriber).close();
  });

  it('subscribing 1,000 times to one app on one socket delivers each event once', async () => {
    const f = await appFixture(t);
    const ws = await Subscriber.open(t.base, f.owner.token);
    for (let i = 0; i < 1000; i++) ws.ws.send(JSON.stringify({ type: 'subscribe', app_id: f.app.id }));
    await within(
      ws.nth((x) => x.type === 'subscribed', 1000),
      '1,000 subscribed answers',
    );
    await f.keys(1);
    await f.keys(2);
    await ws.next((x) => x.event?.kind === 'license.generate' && x.event.data.count === 2);
    expect(ws.events('license.generate').map((x) => x.event.data.count)).toEqual([1, 2]);
    ws.close();
  });
});
