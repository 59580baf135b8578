// Floating seats (docs/protocol.md 12.2) on one worker: the bound per key (the app's or the key's own),
// `reject` and `kick_oldest` (REST and the realtime channel), seats freed by stop, kill, expiry and
// a session that is no longer alive, end users counting against their key, live_sessions on key
// rows, the settings' validation, and the kill's audit line, live event and webhook.
import fs from 'node:fs/promises';
import { pack } from 'msgpackr';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { ClientApi, hwid } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';
import { openChannel } from '../../helpers/channel-client.js';
import { Subscriber } from '../../helpers/live-subscriber.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { shardOf } from '../../../src/platform/cluster/cluster-node.js';

let t: TestServer;
let receiver: WebhookReceiver<{ path: string; body: string }>;
const clock = new TestClock();
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', ALLOW_PRIVATE_WEBHOOKS: '1' }, { clock });
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);
const LIMIT = { detail: 'Concurrent session limit reached' };

interface Seat {
  c: ClientApi;
  session: string;
  ip: string;
}

/** A client session activated with `key` (license-only), not yet started. */
async function activated(f: AppFixture, key: string): Promise<Seat> {
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/license', { session, license: key, hwid: hwid() });
  expect(r.status).toBe(200);
  return { c, session, ip: c.extraHeaders['x-forwarded-for']! };
}

const start = (s: Seat) => s.c.post('/api/client/heartbeat/start', { session: s.session, system_id: SYS });

async function started(f: AppFixture, key: string): Promise<Seat & { token: string }> {
  const s = await activated(f, key);
  const r = await start(s);
  expect(r.status).toBe(200);
  return { ...s, token: r.body.token };
}

/** One beat with the session's current token; an accepted beat moves the token on. */
async function beat(s: Seat & { token: string }, index: number, over: Record<string, unknown> = {}) {
  const r = await s.c.post('/api/client/heartbeat', {
    session: s.session,
    token: s.token,
    system_id: SYS,
    beat_index: index,
    code_hash: HASH,
    ...over,
  });
  if (r.status === 200) s.token = r.body.new_token;
  return r;
}

async function keyRow(f: AppFixture, id?: string) {
  const items = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items;
  return id ? items.find((k: { id: string }) => k.id === id) : items[0];
}

describe('settings', () => {
  it('apps carry max_sessions 0 and session_overflow reject by default; PATCH validates both', async () => {
    const f = await appFixture(t);
    expect(f.app).toMatchObject({ max_sessions: 0, session_overflow: 'reject' });
    for (const bad of [
      { max_sessions: -1 },
      { max_sessions: 1001 },
      { max_sessions: 1.5 },
      { session_overflow: 'x' },
    ]) {
      const r = await f.owner.patch(`/apps/${f.app.id}`, bad);
      expect(r.status).toBe(422);
      expect(r.body.detail[0].loc[1]).toBe(Object.keys(bad)[0]);
    }
    const ok = await f.owner.patch(`/apps/${f.app.id}`, { max_sessions: 1000, session_overflow: 'kick_oldest' });
    expect(ok.body).toMatchObject({ max_sessions: 1000, session_overflow: 'kick_oldest' });
    expect((await f.owner.get(`/api/apps/${f.app.id}`)).body).toMatchObject({ max_sessions: 1000 });
  });

  it('a key takes max_sessions at generation and by PATCH /api/licenses/{id} (null: the app), audited', async () => {
    const f = await appFixture(t);
    expect(
      (await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1, max_sessions: 1001 })).status,
    ).toBe(422);
    const gen = await f.owner.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1, max_sessions: 3 });
    expect(gen.body[0]).toMatchObject({ max_sessions: 3, live_sessions: 0 });
    const id = gen.body[0].id as string;
    expect((await keyRow(f, id)).max_sessions).toBe(3);
    for (const bad of [{ max_sessions: 'x' }, { max_sessions: -1 }, { max_sessions: 1001 }, {}]) {
      expect((await f.owner.patch(`/api/licenses/${id}`, bad)).status).toBe(422);
    }
    expect((await f.owner.patch(`/api/licenses/${id}`, { max_sessions: null })).body).toMatchObject({
      id,
      max_sessions: null,
    });
    expect((await f.owner.patch(`/licenses/${id}`, { max_sessions: 7 })).body.max_sessions).toBe(7);
    expect(
      (await f.owner.patch('/api/licenses/00000000-0000-4000-8000-000000000000', { max_sessions: 1 })).status,
    ).toBe(404);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=license.update`)).body;
    expect(logs.map((l: { detail: string }) => l.detail)).toEqual([
      expect.stringMatching(/changed: max_sessions$/),
      expect.stringMatching(/changed: max_sessions$/),
    ]);
  });
});

describe('reject', () => {
  it('refuses a start over the bound with 409 until a seat is stopped; live_sessions counts the seats', async () => {
    const f = await appFixture(t, { max_sessions: 2 });
    const [key] = await f.keys(1);
    const a = await started(f, key!);
    const b = await started(f, key!);
    const c = await activated(f, key!);
    const refused = await start(c);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual(LIMIT);
    expect((await keyRow(f)).live_sessions).toBe(2);
    // A second start of a session that holds a seat is the usual 409, not a seat.
    expect((await start(a)).body).toEqual({ detail: 'heartbeat session already exists for this nonce' });
    expect((await a.c.post('/api/client/heartbeat/stop', { session: a.session, token: a.token })).status).toBe(200);
    expect((await start(c)).status).toBe(200);
    expect((await start(await activated(f, key!))).body).toEqual(LIMIT);
    expect((await beat(b, 1)).status).toBe(200);
    expect((await keyRow(f)).live_sessions).toBe(2);
    // Another key of the app has seats of its own.
    const [other] = await f.keys(1);
    await started(f, other!);
  });

  it("a key's own max_sessions overrides the app's; null returns to it", async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { max_sessions: 1 });
    await started(f, key!);
    const second = await activated(f, key!);
    expect((await start(second)).body).toEqual(LIMIT);
    const id = (await keyRow(f)).id;
    await f.owner.patch(`/api/licenses/${id}`, { max_sessions: null });
    expect((await start(second)).status).toBe(200);
    await f.owner.patch(`/apps/${f.app.id}`, { max_sessions: 2 });
    expect((await start(await activated(f, key!))).body).toEqual(LIMIT);
  });

  it("an end user's sessions count against its key", async () => {
    const f = await appFixture(t, { max_sessions: 1 });
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    const username = `seat-${f.app.id.slice(0, 8)}`;
    const reg = await c.post('/api/client/register', {
      session,
      username,
      password: 'pw-123456',
      license: key,
      hwid: hwid(),
    });
    expect(reg.status).toBe(200);
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: SYS })).status).toBe(200);
    const c2 = f.client();
    const s2 = await f.session(c2);
    const login = await c2.post('/api/client/login', { session: s2, username, password: 'pw-123456', hwid: hwid() });
    expect(login.status).toBe(200);
    expect((await c2.post('/api/client/heartbeat/start', { session: s2, system_id: SYS })).body).toEqual(LIMIT);
    // The key's own seat is the same seat: a license-only session of the key is refused too.
    expect((await start(await activated(f, key!))).body).toEqual(LIMIT);
  });
});

describe('seats are freed', () => {
  it('by a kill (a beat that kills the session)', async () => {
    const f = await appFixture(t, { max_sessions: 1 });
    const [key] = await f.keys(1);
    const a = await started(f, key!);
    const b = await activated(f, key!);
    expect((await start(b)).body).toEqual(LIMIT);
    expect((await beat(a, 1, { system_id: 'system-9999' })).body).toEqual({ detail: 'rejected' });
    expect((await start(b)).status).toBe(200);
  });

  it('by a revocation (a banned key kills its sessions)', async () => {
    const f = await appFixture(t, { max_sessions: 1 });
    const [key] = await f.keys(1);
    await started(f, key!);
    const id = (await keyRow(f)).id;
    await f.owner.patch(`/licenses/${id}/ban`, { banned: true });
    await f.owner.patch(`/licenses/${id}/ban`, { banned: false });
    const b = await activated(f, key!);
    expect((await start(b)).status).toBe(200);
  });

  it('by expiry (the sweeper evicts the session)', async () => {
    const f = await appFixture(t, { max_sessions: 1, heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    await started(f, key!);
    const b = await activated(f, key!);
    expect((await start(b)).body).toEqual(LIMIT);
    clock.advance(60_001);
    t.server.app.domain.heartbeat.owner.host.sweep();
    expect((await keyRow(f)).live_sessions).toBe(0);
    expect((await start(b)).status).toBe(200);
  });

  it('once a session is no longer alive (no beat for 3 intervals): its seat goes to a new start and it is ended', async () => {
    const f = await appFixture(t, { max_sessions: 1, heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const a = await started(f, key!);
    expect((await beat(a, 1)).status).toBe(200);
    const b = await activated(f, key!);
    expect((await start(b)).body).toEqual(LIMIT);
    clock.advance(15_001); // past 3 intervals, inside the 60 s expiry window
    expect((await keyRow(f)).live_sessions).toBe(0);
    expect((await start(b)).status).toBe(200);
    // The late session cannot come back over the bound.
    expect((await beat(a, 2)).body).toEqual({ detail: 'rejected' });
  });
});

describe('an unlimited key (max_sessions 0, the default)', () => {
  it('starts any number of sessions and never ends a late one while tidying its seat table', async () => {
    const f = await appFixture(t, { heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const late = await started(f, key!);
    expect((await beat(late, 1)).status).toBe(200);
    clock.advance(16_000); // no longer alive (3 intervals), still inside the 60 s expiry window
    for (let i = 0; i < 17; i++) await started(f, key!); // the table is tidied once it holds 16
    expect((await keyRow(f)).live_sessions).toBe(17);
    // docs/spec.md unchanged: the late session's next beat is accepted (with a drift warning).
    expect((await beat(late, 2)).status).toBe(200);
    expect((await keyRow(f)).live_sessions).toBe(18);
  });
});

describe('the stored seat table', () => {
  const tableOf = async (licenseId: string) =>
    t.server.services.coordinator.hashGet(`seats:${shardOf(licenseId)}`, licenseId);
  const keyId = async (f: AppFixture) =>
    (await f.sql<{ id: string }>('select id from license_keys where app_id = $1', [f.app.id]))[0]!.id;

  it('a table of the previous layout (msgpack) still counts against the bound, and the next write replaces it', async () => {
    const f = await appFixture(t, { max_sessions: 2, heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const first = await started(f, key!);
    const id = await keyId(f);
    // As the previous build stored it: [session, claimed at, ...]; a claim without a session counts 15 s.
    const now = clock.now();
    await t.server.services.coordinator.hashSet(
      `seats:${shardOf(id)}`,
      id,
      pack([first.session, now, 'x'.repeat(43), now]),
    );
    expect((await start(await activated(f, key!))).body).toEqual(LIMIT);
    expect((await tableOf(id))![0]).toBe(0xf1);
    clock.advance(16_000); // the claim that never started lapses; the first session is no longer alive either
    expect((await start(await activated(f, key!))).status).toBe(200);
  });

  it('a malformed table is dropped, not appended to: the start succeeds and the table is written afresh', async () => {
    const f = await appFixture(t, { heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    await started(f, key!);
    const id = await keyId(f);
    // A count of 5 and a record cut short after its length byte.
    await t.server.services.coordinator.hashSet(`seats:${shardOf(id)}`, id, Buffer.from([0xf1, 5, 0, 0, 0, 43, 65]));
    expect((await start(await activated(f, key!))).status).toBe(200);
    const table = (await tableOf(id))!;
    expect([table[0], table.readUInt32LE(1), table.length]).toEqual([0xf1, 1, 5 + 1 + 43 + 8]);
  });

  it('an unlimited key: a second start of a live session (409) finds its appended record and keeps its seat', async () => {
    const f = await appFixture(t, { heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const seats = [];
    for (let i = 0; i < 5; i++) seats.push(await started(f, key!));
    // Found among the records: the claim took nothing new, so the refused start gives nothing back.
    expect((await start(seats[2]!)).status).toBe(409);
    // The next claim on the key queues behind whatever that start released.
    await started(f, key!);
    expect((await keyRow(f)).live_sessions).toBe(6);
  });

  it("an unlimited key's table takes appended claims past a tidy; a stop frees one seat", async () => {
    const f = await appFixture(t, { heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const seats = [];
    for (let i = 0; i < 40; i++) seats.push(await started(f, key!));
    expect((await keyRow(f)).live_sessions).toBe(40);
    const id = await keyId(f);
    const table = (await tableOf(id))!;
    // Rewritten by the tidy at 16 records (the next at 48), appended before and after: one record a seat.
    expect(table[0]).toBe(0xf1);
    expect(table.readUInt32LE(1)).toBe(40);
    expect(table.length).toBe(5 + 40 * (1 + 43 + 8));
    // A session that stops gives its seat back; the others keep theirs.
    const s = seats[0]!;
    expect((await s.c.post('/api/client/heartbeat/stop', { session: s.session, token: s.token })).status).toBe(200);
    expect((await keyRow(f)).live_sessions).toBe(39);
  });
});

describe('kick_oldest', () => {
  it('ends the session with the oldest last beat (REST: next beat rejected; channel: revoked), audited, announced', async () => {
    const f = await appFixture(t, {
      max_sessions: 2,
      session_overflow: 'kick_oldest',
      webhook: `${receiver.url}/seats-hook`,
    });
    const [key] = await f.keys(1);
    const live = await Subscriber.open(t.base, f.owner.token);
    await live.subscribe(f.app.id);
    // The oldest last beat: a session on the realtime channel.
    const onChannel = await activated(f, key!);
    const ch = await openChannel(t.base, onChannel.session, { ip: onChannel.ip });
    expect((await ch.call('heartbeat/start', { system_id: SYS })).status).toBe(200);
    clock.advance(1_000);
    const rest = await started(f, key!);
    clock.advance(1_000);
    const revoked = ch.next('revoked');
    const third = await started(f, key!);
    expect(await revoked).toMatchObject({ type: 'revoked', reason: 'session_killed' });
    // `rest` beats now: `third` (its start counts as its last beat) holds the oldest last beat.
    expect((await beat(rest, 1)).status).toBe(200);
    clock.advance(1_000);
    const fourth = await started(f, key!);
    expect((await beat(third, 1)).body).toEqual({ detail: 'rejected' });
    expect((await beat(rest, 2)).status).toBe(200);
    expect((await beat(fourth, 1)).status).toBe(200);
    expect((await keyRow(f)).live_sessions).toBe(2);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=heartbeat.kill`)).body;
    expect(logs.map((l: { detail: string }) => l.detail)).toEqual([
      'Session killed: session limit',
      'Session killed: session limit',
    ]);
    const event = await live.next((m) => m.type === 'event' && m.event.kind === 'heartbeat.kill');
    expect(event.event.data).toMatchObject({ reason: 'session_limit', license_id: (await keyRow(f)).id });
    const hit = await receiver.nextHit(
      (h) => h.path === '/seats-hook' && JSON.parse(h.body).event === 'heartbeat.kill',
    );
    expect(JSON.parse(hit.body).data).toMatchObject({ reason: 'session_limit' });
    live.close();
    ch.close();
  });
});

describe('a restart of the single-process server', () => {
  it('keeps the seats with the sessions (restart checkpoint): the held seat still refuses, then frees on stop', async () => {
    const db = await createTestDatabase();
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kw-seats-'));
    const env = { TRUSTED_PROXIES: '127.0.0.1' };
    let first: TestServer | undefined = await startTestServer(env, { databaseUrl: db.url, dataDir });
    let second: TestServer | undefined;
    try {
      const f = await appFixture(first, { max_sessions: 1 });
      const [key] = await f.keys(1);
      const a = await started(f, key!);
      const b = await activated(f, key!);
      expect((await start(b)).body).toEqual(LIMIT);
      await first.close();
      first = undefined;
      second = await startTestServer(env, { databaseUrl: db.url, dataDir });
      const on = (s: Seat) => {
        const c = new ClientApi(second!.base);
        c.extraHeaders['x-forwarded-for'] = s.ip;
        return { ...s, c };
      };
      const b2 = on(b);
      expect((await start(b2)).body).toEqual(LIMIT);
      const a2 = { ...on(a), token: a.token };
      expect((await beat(a2, 1)).status).toBe(200);
      expect((await a2.c.post('/api/client/heartbeat/stop', { session: a2.session, token: a2.token })).status).toBe(
        200,
      );
      expect((await start(b2)).status).toBe(200);
    } finally {
      await first?.close();
      await second?.close();
      await db.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
