// docs/api.md "Webhook deliveries": every attempt is recorded with its status, error, latency and the
// first KiB of the answer; listed newest first with cursor paging, scoped to the webhook's account
// (an owner reads its tree); a delivery can be sent again (same event id and body, fresh signature);
// rows older than 30 days are pruned.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';

interface Arrival {
  path: string;
  body: string;
  signature: string;
}

/** Answers each path with the statuses queued for it (then 200), the body a long run of "é". */
class Receiver {
  readonly arrivals: Arrival[] = [];
  readonly plan = new Map<string, number[]>();
  private waiters: { n: number; resolve: () => void }[] = [];
  private server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = this.plan.get(req.url!)?.shift() ?? 200;
      this.arrivals.push({
        path: req.url!,
        body: Buffer.concat(chunks).toString('utf8'),
        signature: String(req.headers['x-keywarden-signature']),
      });
      for (const w of this.waiters.splice(0)) (this.arrivals.length >= w.n ? w.resolve : () => this.waiters.push(w))();
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end('é'.repeat(2000));
    });
  });
  url = '';
  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  /** Resolves once `n` deliveries have arrived in all. */
  arrived(n: number): Promise<void> {
    if (this.arrivals.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

let t: TestServer;
let receiver: Receiver;
const clock = new TestClock();

beforeAll(async () => {
  receiver = new Receiver();
  await receiver.start();
  t = await startTestServer(
    { TRUSTED_PROXIES: '127.0.0.1', ALLOW_PRIVATE_WEBHOOKS: '1', WEBHOOK_RETRY_MS: '10,10,10' },
    { clock },
  );
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

function signedWith(a: Arrival, secret: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(a.signature);
  return m !== null && createHmac('sha256', secret).update(`${m[1]}.${a.body}`).digest('hex') === m[2];
}

async function activate(f: AppFixture, key: string, name: string): Promise<void> {
  const c = f.client();
  c.now = () => clock.now(); // the server's time, moved by the test
  const r = await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid(name) });
  expect(r.status).toBe(200);
}

describe('webhook deliveries', () => {
  let f: AppFixture;
  let secret: string;

  beforeAll(async () => {
    f = await appFixture(t, { webhook: `${receiver.url}/app` });
    secret = (await f.owner.get('/api/auth/me')).body.account.webhook_secret;
  });

  it('records every attempt newest first, with status, latency and at most 1 KiB of the answer', async () => {
    receiver.plan.set('/app', [500, 503]);
    const before = receiver.arrivals.length;
    const [key] = await f.keys(1);
    await activate(f, key!, 'd1');
    await receiver.arrived(before + 3);
    await t.server.app.domain.notify.webhooks.drain();
    const r = await f.owner.get('/api/account/webhook/deliveries?limit=3');
    expect(r.status).toBe(200);
    expect(r.body.map((d: { attempt: number }) => d.attempt)).toEqual([3, 2, 1]);
    expect(r.body.map((d: { status: number }) => d.status)).toEqual([200, 503, 500]);
    const [last] = r.body;
    expect(last).toMatchObject({
      event: 'client.license',
      url: `${receiver.url}/app`,
      error: null,
      latency_ms: expect.any(Number),
      at: expect.any(String),
    });
    expect(new Set(r.body.map((d: { event_id: string }) => d.event_id)).size).toBe(1);
    expect(JSON.parse(receiver.arrivals.at(-1)!.body).id).toBe(last.event_id);
    // 1 KiB of two-byte characters: 512 of them, never half of one.
    expect(Buffer.byteLength(last.response_excerpt)).toBe(1024);
    expect(last.response_excerpt).toBe('é'.repeat(512));
  });

  it('pages with before= and reaches every delivery exactly once', async () => {
    const all = (await f.owner.get('/api/account/webhook/deliveries?limit=1000')).body as { id: string }[];
    const seen: string[] = [];
    let before = '';
    for (;;) {
      const page = (await f.owner.get(`/api/account/webhook/deliveries?limit=2${before}`)).body as { id: string }[];
      if (page.length === 0) break;
      seen.push(...page.map((d) => d.id));
      before = `&before=${page.at(-1)!.id}`;
    }
    expect(seen).toEqual(all.map((d) => d.id));
    expect(all.length).toBeGreaterThanOrEqual(3);
  });

  it('records a network failure with its error and no status', async () => {
    const g = await appFixture(t, { webhook: 'http://127.0.0.1:1/closed' });
    const [key] = await g.keys(1);
    await activate(g, key!, 'd2');
    await t.server.app.domain.notify.webhooks.drain();
    const rows = (await g.owner.get('/api/account/webhook/deliveries?limit=4')).body as Record<string, unknown>[];
    const closed = rows.filter((d) => d.url === 'http://127.0.0.1:1/closed');
    expect(closed).toHaveLength(4);
    expect(closed[0]).toMatchObject({ status: null, error: expect.stringMatching(/^network error: /) });
  });

  it('redelivers the same event id and body with a fresh signature, as a new delivery row', async () => {
    const [first] = (await f.owner.get('/api/account/webhook/deliveries?limit=1000')).body.filter(
      (d: { url: string; status: number }) => d.url === `${receiver.url}/app` && d.status === 200,
    );
    const original = receiver.arrivals.find((a) => JSON.parse(a.body).id === first.event_id)!;
    const before = receiver.arrivals.length;
    clock.advance(5_000); // a fresh signature carries a new timestamp
    const r = await f.owner.post(`/api/webhook-deliveries/${first.id}/redeliver`, {});
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ event_id: first.event_id, attempt: 1, status: 200, event: 'client.license' });
    expect(Number(r.body.id)).toBeGreaterThan(Number(first.id));
    await receiver.arrived(before + 1);
    const again = receiver.arrivals[before]!;
    expect(again.body).toBe(original.body);
    expect(again.signature).not.toBe(original.signature);
    expect(signedWith(again, secret)).toBe(true);
    const newest = (await f.owner.get('/api/account/webhook/deliveries?limit=1')).body[0];
    expect(newest.id).toBe(r.body.id);
  });

  it("scopes the log to the webhook's account; an owner reads its tree, a reseller only its own", async () => {
    const g = await appFixture(t); // no app webhook: the reseller's own default takes the reseller's keys
    const member = await f.owner.post('/api/team', {
      username: 'deliveryseller',
      password: 'seller-pass-1',
      allowed_apps: [g.app.id],
      permissions: { generate_keys: true },
    });
    expect(member.status).toBe(200);
    await f.owner.patch(`/api/team/${member.body.id}/webhook`, { webhook: `${receiver.url}/seller` });
    const seller = await new Api(t.base).signIn('deliveryseller', 'seller-pass-1');
    const key = (await seller.post(`/apps/${g.app.id}/licenses`, { amount: 1, duration: 1 })).body[0].key;
    await activate(g, key, 'd3');
    await t.server.app.domain.notify.webhooks.drain();

    const own = (await seller.get('/api/account/webhook/deliveries')).body;
    expect(own.map((d: { url: string }) => d.url)).toEqual([`${receiver.url}/seller`]);
    const viaOwner = await f.owner.get(`/api/account/webhook/deliveries?account_id=${member.body.id}`);
    expect(viaOwner.body.map((d: { id: string }) => d.id)).toEqual(own.map((d: { id: string }) => d.id));
    // The owner's own log does not hold the reseller's deliveries.
    const ownerLog = (await f.owner.get('/api/account/webhook/deliveries?limit=1000')).body;
    expect(ownerLog.some((d: { id: string }) => d.id === own[0].id)).toBe(false);

    const ownerId = (await f.owner.get('/api/auth/me')).body.account.id;
    const peek = await seller.get(`/api/account/webhook/deliveries?account_id=${ownerId}`);
    expect(peek.status).toBe(404);
    expect(peek.body.detail).toBe('Account not found');
    const redeliver = await seller.post(`/api/webhook-deliveries/${ownerLog[0].id}/redeliver`, {});
    expect(redeliver.status).toBe(404);
    expect(redeliver.body.detail).toBe('Delivery not found');
    expect((await f.owner.post('/api/webhook-deliveries/999999999/redeliver', {})).body.detail).toBe(
      'Delivery not found',
    );
    expect((await f.owner.post('/api/webhook-deliveries/not-a-number/redeliver', {})).status).toBe(404);
  });

  it('keeps deliveries 30 days', async () => {
    const oldest = (await f.owner.get('/api/account/webhook/deliveries?limit=1000')).body.at(-1);
    const [key] = await f.keys(1); // unused keys start their duration at activation
    clock.advance(31 * 24 * 3600_000);
    const before = receiver.arrivals.length;
    await activate(f, key!, 'd4');
    await receiver.arrived(before + 1);
    await t.server.app.domain.notify.webhooks.drain();
    const owner = await new Api(t.base).signIn(OWNER.username, OWNER.password); // the old sign-in has lapsed
    const rows = (await owner.get('/api/account/webhook/deliveries?limit=1000')).body as { id: string }[];
    expect(rows).toHaveLength(1);
    expect(rows[0]!.id).not.toBe(oldest.id);
  });
});
