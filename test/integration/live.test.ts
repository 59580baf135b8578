// Live updates over WebSocket (JSON and msgpack) and SSE, with scoping and hiding, and across
// two worker processes sharing PostgreSQL and Redis.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { OWNER, createTestDatabase, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { Subscriber } from '../helpers/live-subscriber.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

describe('WebSocket /api/ws', () => {
  it('refuses an unauthenticated upgrade', async () => {
    await expect(Subscriber.open(t.base, undefined)).rejects.toThrow(/401/);
  });

  it('delivers events of a subscribed app as JSON frames', async () => {
    const f = await appFixture(t);
    const sub = await Subscriber.open(t.base, f.owner.token);
    expect(await sub.subscribe(f.app.id)).toEqual({ type: 'subscribed', app_id: f.app.id });
    await f.keys(2);
    const frame = await sub.next((x) => x.type === 'event' && x.event.kind === 'license.generate');
    expect(frame.event).toMatchObject({
      kind: 'license.generate',
      app_id: f.app.id,
      data: { count: 2 },
      id: expect.any(String),
      at: expect.any(String),
    });
    expect(frame.event.reseller_id).toBeUndefined();
    sub.close();
  });

  it('speaks MessagePack with the msgpack subprotocol, and refuses apps the caller cannot see', async () => {
    const f = await appFixture(t);
    const sub = await Subscriber.open(t.base, f.owner.token, 'msgpack');
    expect(sub.ws.protocol).toBe('msgpack');
    await sub.subscribe(f.app.id);
    await f.keys(1);
    const frame = await sub.next((x) => x.type === 'event');
    expect(frame.event.kind).toBe('license.generate');
    const err = await sub.subscribe('00000000-0000-0000-0000-000000000000');
    expect(err).toMatchObject({ type: 'error', detail: 'Application not found' });
    sub.close();
  });

  it('applies reseller scoping and hiding to each subscriber', async () => {
    const f = await appFixture(t);
    const r = await f.owner.post('/api/team', {
      username: 'liveseller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { generate_keys: true, view_keys: true },
    });
    const seller = await new Api(t.base).signIn('liveseller', 'seller-pass-1');
    const ownerSub = await Subscriber.open(t.base, f.owner.token);
    const sellerSub = await Subscriber.open(t.base, seller.token);
    await ownerSub.subscribe(f.app.id);
    await sellerSub.subscribe(f.app.id);
    await f.keys(1); // the owner's keys: not the reseller's business
    const sellerKey = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 3 })).body[0].key;
    const c = f.client('203.0.113.9');
    const session = await f.session(c);
    await c.post('/api/client/license', { session, license: sellerKey, hwid: hwid('live') });
    const ownerView = await ownerSub.next((x) => x.event?.kind === 'client.license');
    const sellerView = await sellerSub.next((x) => x.event?.kind === 'client.license');
    expect(ownerView.event.data).toMatchObject({ hwid: hwid('live'), ip: '203.0.113.9' });
    expect(sellerView.event.data).not.toHaveProperty('hwid');
    expect(sellerView.event.data).not.toHaveProperty('ip');
    const sellerKinds = sellerSub.frames
      .filter((x) => x.type === 'event')
      .map((x) => `${x.event.kind}:${x.event.data.count ?? ''}`);
    expect(sellerKinds.filter((k) => k.startsWith('license.generate'))).toEqual(['license.generate:1']); // only its own batch
    expect(ownerSub.frames.filter((x) => x.event?.kind === 'license.generate')).toHaveLength(2);
    void r;
    ownerSub.close();
    sellerSub.close();
  });
});

describe('SSE /api/apps/{id}/events', () => {
  it('streams one `event:` per kind', async () => {
    const f = await appFixture(t);
    const ctrl = new AbortController();
    const res = await fetch(`${t.base}/api/apps/${f.app.id}/events`, {
      headers: { authorization: `Bearer ${f.owner.token}` },
      signal: ctrl.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    await f.keys(1);
    while (!text.includes('event: license.generate')) text += new TextDecoder().decode((await reader.read()).value);
    const data = JSON.parse(/data: (.*)\n/.exec(text.slice(text.indexOf('event: license.generate')))![1]!);
    expect(data).toMatchObject({ kind: 'license.generate', app_id: f.app.id });
    ctrl.abort();
    const anon = await fetch(`${t.base}/api/apps/${f.app.id}/events`);
    expect(anon.status).toBe(401);
  });
});

const hasRedis = await redisAvailable();
describe.skipIf(!hasRedis)('across worker processes (Redis)', () => {
  let a: ServerProcess;
  let b: ServerProcess;
  let drop: () => Promise<void>;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-live-'));

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kwlive${Date.now()}:`,
      DATA_DIR: dataDir,
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
    };
    a = await spawnServer(env);
    b = await spawnServer(env);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('an event raised on one worker reaches subscribers on both', async () => {
    const onA = await new Api(a.base).signIn(OWNER.username, OWNER.password);
    const onB = await new Api(b.base).signIn(OWNER.username, OWNER.password);
    const app = (await onA.post('/apps', { name: 'Clustered' })).body;
    const subA = await Subscriber.open(a.base, onA.token);
    const subB = await Subscriber.open(b.base, onB.token);
    await subA.subscribe(app.id);
    await subB.subscribe(app.id);
    await onA.post(`/apps/${app.id}/licenses`, { amount: 3, duration: 1 });
    const [ea, eb] = await Promise.all([
      subA.next((x) => x.event?.kind === 'license.generate'),
      subB.next((x) => x.event?.kind === 'license.generate'),
    ]);
    expect(ea.event.id).toBe(eb.event.id);
    expect(eb.event.data.count).toBe(3);
    subA.close();
    subB.close();
  });
});
