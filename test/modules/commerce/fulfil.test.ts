// Products and order fulfilment (docs/protocol.md 14.4-14.7) against a real server: Stripe-Signature exactly
// as Stripe documents it (t, any v1, 300 s either way, a changed body refused), keys created once per
// event even under ten concurrent deliveries, quantity and body bounds, dynamic delivery answering the
// same keys for the same order id, the buyer's order page, and orders on the dashboard.
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let owner: Api;
let appId: string;
let product: { id: string; webhook_secret: string };

const nowS = () => Math.floor(Date.now() / 1000);

function stripeSig(secret: string, body: string, ts = nowS(), extra: string[] = []): string {
  const v1 = createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex');
  return [`t=${ts}`, ...extra, `v1=${v1}`].join(',');
}

function checkout(
  session: string,
  quantity?: string | number,
  email = 'buyer@example.com',
  eventId = `evt_${randomUUID()}`,
) {
  return JSON.stringify({
    id: eventId,
    type: 'checkout.session.completed',
    data: {
      object: {
        id: session,
        customer_details: { email },
        metadata: quantity === undefined ? {} : { quantity },
      },
    },
  });
}

async function stripe(body: string, signature: string, productId = product.id) {
  return owner.call('POST', `/api/fulfil/stripe/${productId}`, undefined, {
    token: '',
    rawBody: body,
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
  });
}

async function keyCount(): Promise<number> {
  const [r] = await t.server.services.sql.all<{ n: string }>(
    'select count(*) as n from license_keys where app_id = ?',
    [appId],
  );
  return Number(r!.n);
}

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appId = (await owner.post('/api/apps', { name: 'Shop app' })).body.id;
  const created = await owner.post(`/api/apps/${appId}/products`, {
    name: 'Pro yearly',
    duration: 365,
    unit: 'days',
    level: 3,
    mask: 'PRO-****-****-****',
    entitlements: ['export', 'cloud.sync'],
    note: 'the yearly plan',
  });
  expect(created.status).toBe(200);
  product = created.body;
}, 120_000);
afterAll(() => t.close());

describe('products', () => {
  it('carry a 32-byte hex webhook secret, sealed at rest, and the generation settings', async () => {
    expect(product.webhook_secret).toMatch(/^[0-9a-f]{64}$/);
    const [row] = await t.server.services.sql.all<{ webhook_secret: string }>(
      'select webhook_secret from products where id = ?',
      [product.id],
    );
    expect(row!.webhook_secret).not.toContain(product.webhook_secret);
    const got = await owner.get(`/api/products/${product.id}`);
    expect(got.body).toMatchObject({
      name: 'Pro yearly',
      duration: 365,
      unit: 'days',
      level: 3,
      mask: 'PRO-****-****-****',
      entitlements: ['export', 'cloud.sync'],
      webhook_secret: product.webhook_secret,
    });
    expect((await owner.get(`/api/apps/${appId}/products`)).body.map((p: { id: string }) => p.id)).toContain(
      product.id,
    );
  });

  it('refuse a mask without placeholders and unknown fields (422)', async () => {
    const bad = await owner.post(`/api/apps/${appId}/products`, { name: 'x', duration: 1, mask: 'ABC' });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['body', 'mask']);
    expect((await owner.post(`/api/apps/${appId}/products`, { name: 'x', duration: 1, price: 3 })).status).toBe(422);
  });

  it('are managed by owners, admins and developers only; a reseller gets 403', async () => {
    await owner.post('/api/team', { username: 'shopseller', password: 'seller-pass-1', allowed_apps: [appId] });
    const seller = await new Api(t.base).signIn('shopseller', 'seller-pass-1');
    expect((await seller.get(`/api/apps/${appId}/products`)).status).toBe(403);
    expect((await seller.post(`/api/apps/${appId}/products`, { name: 'y', duration: 1 })).status).toBe(403);
    const p = (await owner.post(`/api/apps/${appId}/products`, { name: 'Theirs', duration: 1 })).body;
    expect((await seller.get(`/api/products/${p.id}`)).status).toBe(403);
    expect((await seller.patch(`/api/products/${p.id}`, { level: 2 })).status).toBe(403);
    expect((await seller.post(`/api/products/${p.id}/rotate-secret`)).status).toBe(403);
    expect((await seller.delete(`/api/products/${p.id}`)).status).toBe(403);
    expect((await owner.get(`/api/products/${p.id}`)).body.webhook_secret).toBe(p.webhook_secret);
  });

  it('rotate-secret makes the old secret stop verifying; PATCH changes the settings', async () => {
    const p = (await owner.post(`/api/apps/${appId}/products`, { name: 'Rot', duration: 1 })).body;
    const rotated = (await owner.post(`/api/products/${p.id}/rotate-secret`)).body;
    expect(rotated.webhook_secret).not.toBe(p.webhook_secret);
    const body = checkout(`cs_rot_${randomUUID()}`);
    expect((await stripe(body, stripeSig(p.webhook_secret, body), p.id)).status).toBe(400);
    expect((await stripe(body, stripeSig(rotated.webhook_secret, body), p.id)).status).toBe(200);
    const patched = await owner.patch(`/api/products/${p.id}`, { level: 7, unit: 'lifetime' });
    expect(patched.body).toMatchObject({ level: 7, unit: 'lifetime', duration: null });
    // Stripe's own endpoint secret pasted in: Stripe signs with it, as its libraries do (the text as the key).
    const whsec = 'whsec_' + 'A1b2'.repeat(8);
    expect((await owner.patch(`/api/products/${p.id}`, { webhook_secret: whsec })).body.webhook_secret).toBe(whsec);
    const b2 = checkout(`cs_rot_${randomUUID()}`);
    expect((await stripe(b2, stripeSig(whsec, b2), p.id)).status).toBe(200);
    expect((await owner.patch(`/api/products/${p.id}`, { webhook_secret: 'short' })).status).toBe(422);
  });
});

describe('Stripe fulfilment', () => {
  it('creates quantity keys with the product settings, once, and shows them to the buyer', async () => {
    const session = `cs_test_${randomUUID()}`;
    const body = checkout(session, '3');
    const r = await stripe(body, stripeSig(product.webhook_secret, body));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ success: true, created: 3 });
    const page = await new Api(t.base).get(`/api/portal/orders/${session}`);
    expect(page.status).toBe(200);
    expect(page.body.product).toBe('Pro yearly');
    expect(page.body.keys).toHaveLength(3);
    for (const k of page.body.keys) expect(k).toMatch(/^PRO-[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    const keys = await t.server.services.sql.all<{ note: string; created_by: string | null; level: number }>(
      'select note, created_by, level, duration_days from license_keys where note = ?',
      [`order stripe ${session}`],
    );
    expect(keys).toHaveLength(3);
    for (const k of keys) expect(k).toMatchObject({ created_by: null, level: 3, duration_days: 365 });
    const orders = (await owner.get(`/api/apps/${appId}/orders`)).body;
    const order = orders.find((o: { external_id: string }) => o.external_id === session);
    expect(order).toMatchObject({ provider: 'stripe', email: 'buyer@example.com', product_name: 'Pro yearly' });
    expect(order.license_ids).toHaveLength(3);
    expect(order.keys.map((k: { key_preview: string }) => k.key_preview.slice(0, 4))).toEqual(['PRO-', 'PRO-', 'PRO-']);
    expect(JSON.stringify(orders)).not.toContain(page.body.keys[0]);
  });

  it('one event delivered 10 times at once creates its keys once', async () => {
    const before = await keyCount();
    const body = checkout(`cs_race_${randomUUID()}`, 2);
    const sig = stripeSig(product.webhook_secret, body);
    const answers = await Promise.all(Array.from({ length: 10 }, () => stripe(body, sig)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(answers.filter((a) => a.body.created === 2)).toHaveLength(1);
    expect(answers.filter((a) => a.body.duplicate === true)).toHaveLength(9);
    expect((await keyCount()) - before).toBe(2);
  });

  it('accepts any v1 and a timestamp up to 300 s off; refuses 301 s, a changed body, no v1, a wrong secret', async () => {
    const ok = (body: string) => body;
    const b1 = checkout(`cs_sig_${randomUUID()}`);
    expect(
      (await stripe(b1, stripeSig(product.webhook_secret, b1, nowS(), ['v1=' + 'ab'.repeat(32), 'v0=zz']))).status,
    ).toBe(200);
    const b2 = checkout(`cs_sig_${randomUUID()}`);
    expect((await stripe(b2, stripeSig(product.webhook_secret, b2, nowS() - 290))).status).toBe(200);
    const b3 = checkout(`cs_sig_${randomUUID()}`);
    for (const sig of [
      stripeSig(product.webhook_secret, b3, nowS() - 400),
      stripeSig(product.webhook_secret, b3, nowS() + 400),
      stripeSig(product.webhook_secret, ok(b3).replace('buyer@', 'thief@')),
      `t=${nowS()}`,
      stripeSig('0'.repeat(64), b3),
      '',
      'garbage',
    ]) {
      const r = await stripe(b3, sig);
      expect([sig, r.status, r.body]).toEqual([sig, 400, { detail: 'Invalid signature' }]);
    }
    // A replayed event re-signed for a changed body is a new signature over other bytes: still refused as is.
    const tampered = b3.replace('buyer@', 'thief@');
    expect((await stripe(tampered, stripeSig(product.webhook_secret, b3))).status).toBe(400);
  });

  it('answers other events {"ignored": true}; bounds quantity (1-100) and the body (413)', async () => {
    const other = JSON.stringify({ id: 'evt_other', type: 'payment_intent.succeeded', data: { object: {} } });
    const ignored = await stripe(other, stripeSig(product.webhook_secret, other));
    expect([ignored.status, ignored.body]).toEqual([200, { ignored: true }]);
    const before = await keyCount();
    for (const q of ['101', '0', '-1', 'many', 2.5]) {
      const body = checkout(`cs_q_${randomUUID()}`, q);
      const r = await stripe(body, stripeSig(product.webhook_secret, body));
      expect([q, r.status]).toEqual([q, 422]);
    }
    const hundred = checkout(`cs_q_${randomUUID()}`, '100');
    expect((await stripe(hundred, stripeSig(product.webhook_secret, hundred))).body.created).toBe(100);
    expect((await keyCount()) - before).toBe(100);
    const huge = JSON.stringify({ pad: 'x'.repeat(1024 * 1024) });
    expect((await stripe(huge, stripeSig(product.webhook_secret, huge))).status).toBe(413);
  });

  it('keeps an order readable after its product is deleted; unknown and expired orders are 404', async () => {
    const p = (await owner.post(`/api/apps/${appId}/products`, { name: 'Gone soon', duration: 1 })).body;
    const session = `cs_gone_${randomUUID()}`;
    const body = checkout(session);
    expect((await stripe(body, stripeSig(p.webhook_secret, body), p.id)).status).toBe(200);
    expect((await owner.delete(`/api/products/${p.id}`)).status).toBe(200);
    expect((await owner.get(`/api/products/${p.id}`)).status).toBe(404);
    expect((await stripe(body, stripeSig(p.webhook_secret, body), p.id)).status).toBe(404);
    const buyer = new Api(t.base);
    expect((await buyer.get(`/api/portal/orders/${session}`)).body.product).toBe('Gone soon');
    const orders = (await owner.get(`/api/apps/${appId}/orders`)).body;
    expect(orders.find((o: { external_id: string }) => o.external_id === session)).toMatchObject({
      product_id: null,
      product_name: 'Gone soon',
    });
    expect((await buyer.get('/api/portal/orders/cs_unknown')).body).toEqual({ detail: 'Order not found' });
    // A control character (the fuzzer's %00) is an unknown order, never a database error.
    for (const odd of ['%00', 'cs_%0A1', '%7F'])
      expect((await buyer.get(`/api/portal/orders/${odd}`)).status, odd).toBe(404);
    await t.server.services.sql.run(
      `update orders set keys_until = now() - interval '1 second' where external_id = ?`,
      [session],
    );
    expect((await buyer.get(`/api/portal/orders/${session}`)).status).toBe(404);
  });
});

describe('dynamic delivery', () => {
  const sign = (secret: string, body: string) => createHmac('sha512', secret).update(body).digest('hex');
  const deliver = (body: string, sig: string) =>
    owner.call('POST', `/api/fulfil/dynamic/${product.id}`, undefined, {
      token: '',
      rawBody: body,
      headers: { 'content-type': 'application/json', 'x-keywarden-fulfil-signature': sig },
    });

  it('answers the keys as text, one per line; the same order id answers the same keys', async () => {
    const body = JSON.stringify({ event: 'order:paid', data: { uniqid: `sx-${randomUUID()}`, quantity: 2 } });
    const first = await deliver(body, sign(product.webhook_secret, body));
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/plain/);
    const keys = first.raw.toString('utf8').trim().split('\n');
    expect(keys).toHaveLength(2);
    const before = await keyCount();
    const again = await deliver(body, sign(product.webhook_secret, body));
    expect(again.raw.toString('utf8').trim().split('\n')).toEqual(keys);
    expect(await keyCount()).toBe(before);
    const flat = JSON.stringify({ order_id: 12345, quantity: '1' });
    expect((await deliver(flat, sign(product.webhook_secret, flat))).raw.toString('utf8').trim()).toMatch(/^PRO-/);
  });

  it('refuses a bad signature (400) and an order without an id (422)', async () => {
    const body = JSON.stringify({ order_id: 'o-1' });
    expect((await deliver(body, sign('0'.repeat(64), body))).body).toEqual({ detail: 'Invalid signature' });
    expect((await deliver(body, '')).status).toBe(400);
    const noId = JSON.stringify({ quantity: 1 });
    expect((await deliver(noId, sign(product.webhook_secret, noId))).status).toBe(422);
  });

  it('audits every fulfilled order', async () => {
    await t.server.services.audit.repository.flush();
    const logs = (await owner.get(`/api/apps/${appId}/logs?action=order.fulfilled`)).body;
    const items = Array.isArray(logs) ? logs : logs.items;
    expect(items.length).toBeGreaterThan(3);
  });
});
