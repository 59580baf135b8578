// Heartbeat protocol: state table, every kill condition, drift with decay, replay, tokens,
// expiry, stop, the 401/403/404/409 rows and proofs (verified with node:crypto).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid, type ClientApi } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';

let t: TestServer;
const clock = new TestClock();
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' }, { clock });
});
afterAll(() => t.close());

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);

interface Live {
  f: AppFixture;
  c: ClientApi;
  session: string;
  token: string;
  index: number;
  beat(over?: Record<string, unknown>): Promise<{ status: number; body: any }>;
}

async function live(settings: Record<string, unknown> = {}): Promise<Live> {
  const f = await appFixture(t, settings);
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
  const r = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
  expect(r.status).toBe(200);
  const l: Live = {
    f,
    c,
    session,
    token: r.body.token,
    index: 0,
    async beat(over = {}) {
      const index = (over.beat_index as number | undefined) ?? l.index + 1;
      const res = await c.post('/api/client/heartbeat', {
        session,
        token: l.token,
        system_id: SYS,
        beat_index: index,
        code_hash: HASH,
        ...over,
      });
      if (res.status === 200) {
        const expected = createHmac('sha256', l.token)
          .update(`kwhb1\n${session}\n${index}\n${res.body.new_token}\n${res.body.beat_count}`)
          .digest('base64');
        expect(res.body.proof).toBe(expected);
        l.token = res.body.new_token;
        l.index = index;
      }
      return res;
    },
  };
  return l;
}

async function expectKilled(l: Live, over: Record<string, unknown>, action = 'heartbeat.kill') {
  const r = await l.beat(over);
  expect(r.status).toBe(403);
  expect(r.body).toEqual({ detail: 'rejected' });
  const after = await l.beat();
  expect(after.body).toEqual({ detail: 'rejected' }); // the session is gone, even with the right token
  const logs = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=${action}`)).body;
  expect(logs.length).toBeGreaterThan(0);
  return logs[0];
}

describe('heartbeat start', () => {
  it('needs an activated session, returns a TT token, beat_interval and a start proof; a second start is 409', async () => {
    const f = await appFixture(t, { heartbeat_interval: 12 });
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    const early = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(early.status).toBe(403);
    expect(early.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
    await c.post('/api/client/license', { session, license: key, hwid: hwid() });
    const r = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      success: true,
      token: expect.stringMatching(/^TT[0-9a-f]{32}$/),
      beat_interval: 12,
    });
    expect(r.body.proof).toBe(createHmac('sha256', session).update(`kwhs1\n${SYS}\n${r.body.token}`).digest('base64'));
    const again = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: 'heartbeat session already exists for this nonce' });
  });

  it('clamps beat_interval to [5, 300] and defaults to 30', async () => {
    for (const [interval, expected] of [
      [undefined, 30],
      [1, 5],
      [1000, 300],
    ] as const) {
      const l = await live(interval === undefined ? {} : { heartbeat_interval: interval });
      const ctx = t.server.app.domain.heartbeat.owner.host.peek(l.session)!;
      expect(ctx.beatInterval).toBe(expected);
    }
  });

  it('401 for an unknown session, 403 Application disabled (plain) and 404 for a deleted app', async () => {
    const f = await appFixture(t);
    const c = f.client();
    const unknown = await c.post('/api/client/heartbeat/start', { session: 'Z'.repeat(43), system_id: SYS });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ detail: 'Invalid or expired session' });
    const l = await live();
    await l.f.owner.patch(`/apps/${l.f.app.id}`, { enabled: false, disabled_message: 'Custom text' });
    const disabled = await l.beat();
    expect(disabled.status).toBe(403);
    expect(disabled.body).toEqual({ detail: 'Application disabled' });
    await l.f.owner.patch(`/apps/${l.f.app.id}`, { enabled: true });
    expect((await l.beat()).status).toBe(200);
    expect((await l.f.owner.delete(`/api/apps/${l.f.app.id}`)).body).toEqual({ success: true });
    const gone = await l.beat();
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ detail: 'Application not found' });
  });

  it('validates system_id length', async () => {
    const f = await appFixture(t);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/heartbeat/start', { session, system_id: 'short' })).status).toBe(422);
  });
});

describe('beats', () => {
  it('rotate the token, count beats and reset the expiry on each accepted beat', async () => {
    const l = await live();
    const r1 = await l.beat();
    expect(r1.status).toBe(200);
    expect(r1.body).toMatchObject({
      success: true,
      new_token: expect.stringMatching(/^TT[0-9a-f]{32}$/),
      beat_count: 1,
    });
    const r2 = await l.beat({ beat_index: 7 });
    expect(r2.body.beat_count).toBe(2);
  });

  it('refuses a replayed beat_index without advancing it, and a wrong, stale or malformed token without killing', async () => {
    const l = await live();
    await l.beat(); // index 1
    const stale = l.token;
    await l.beat(); // index 2, token rotates
    expect((await l.beat({ beat_index: 2 })).body).toEqual({ detail: 'rejected' }); // replay
    expect((await l.beat({ beat_index: 1 })).body).toEqual({ detail: 'rejected' });
    expect((await l.beat({ token: stale, beat_index: 50 })).body).toEqual({ detail: 'rejected' });
    expect((await l.beat({ token: 'TT' + '0'.repeat(32), beat_index: 51 })).body).toEqual({ detail: 'rejected' });
    expect((await l.beat({ token: 'not-a-token', beat_index: 52 })).body).toEqual({ detail: 'rejected' });
    // Nothing above moved last_beat_index: 3 is still accepted.
    const ok = await l.beat({ beat_index: 3 });
    expect(ok.status).toBe(200);
    expect(ok.body.beat_count).toBe(3);
    const refusals = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=client.heartbeat`)).body;
    expect(refusals.some((e: { detail: string }) => e.detail.includes('replayed beat_index'))).toBe(true);
  });

  it('validates beat_index range and code_hash length', async () => {
    const l = await live();
    for (const over of [{ beat_index: 0 }, { beat_index: 2 ** 31 + 1 }, { beat_index: 1.5 }, { code_hash: 'short' }]) {
      expect((await l.beat(over)).status, JSON.stringify(over)).toBe(422);
    }
    expect((await l.beat({ beat_index: 2 ** 31 })).status).toBe(200);
  });
});

describe('kill conditions', () => {
  it('system_id differs from start', async () => {
    const l = await live();
    await l.beat();
    const entry = await expectKilled(l, { system_id: 'other-system' });
    expect(entry.detail).toContain('system_id');
    expect(entry.level).toBe('warning');
  });

  it('no code_hash on the first beat when nothing is pinned', async () => {
    await expectKilled(await live(), { code_hash: undefined });
  });

  it('code_hash or code_size differs from the first-beat baseline', async () => {
    const a = await live();
    await a.beat({ code_size: 1000 });
    await expectKilled(a, { code_hash: 'beef'.repeat(8) });
    const b = await live();
    await b.beat({ code_size: 1000 });
    await b.beat({ code_size: 1000, code_hash: HASH.toUpperCase() }); // lower-cased server-side
    await expectKilled(b, { code_size: 1001 });
  });

  it('code_hash differs from the pinned expected_binary_hash; with a pin the first beat may omit it', async () => {
    const pinned = 'aa'.repeat(32);
    const ok = await live({ expected_binary_hash: pinned });
    expect((await ok.beat({ code_hash: undefined })).status).toBe(200);
    expect((await ok.beat({ code_hash: pinned.toUpperCase() })).status).toBe(200);
    const bad = await live({ expected_binary_hash: pinned });
    await expectKilled(bad, { code_hash: HASH });
  });

  it('debugger_detected while injection_detection is on (and not when off)', async () => {
    await expectKilled(await live(), { debugger_detected: true });
    const off = await live({ injection_detection: false });
    expect((await off.beat({ debugger_detected: true })).status).toBe(200);
  });

  it('three drift warnings kill; a clean beat decays the counter', async () => {
    const l = await live({ heartbeat_interval: 5 }); // warning when > 12.5 s since the previous beat
    clock.advance(13_000);
    const first = await l.beat(); // the start counts as the previous beat: warning 1
    expect(first.status).toBe(200);
    clock.advance(4_000);
    await l.beat(); // clean: back to 0
    clock.advance(13_000);
    await l.beat(); // 1
    clock.advance(13_000);
    expect((await l.beat()).status).toBe(200); // 2
    const logs = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=client.heartbeat`)).body;
    expect(logs[0].detail).toContain('drift warning 2 of 3');
    clock.advance(13_000);
    const entry = await expectKilled(l, {}); // the beat earning the third warning is refused and kills
    expect(entry.detail).toContain('drift');
  });

  it('a kill ends the activation: a new start needs authentication again', async () => {
    const l = await live();
    await expectKilled(l, { debugger_detected: true });
    const r = await l.c.post('/api/client/heartbeat/start', { session: l.session, system_id: SYS });
    expect(r.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
  });
});

describe('a stalled worker (regression: a lease renewed late used to drop every session)', () => {
  it('keeps its sessions when its shard leases outlive their TTL before a renewal', async () => {
    const l = await live({ heartbeat_interval: 30 });
    expect((await l.beat()).status).toBe(200);
    clock.advance(10_000); // longer than the 4 s lease TTL, as after a long event-loop stall
    await t.server.app.domain.node.tick();
    expect(t.server.app.domain.node.ownedShards).toBe(1024);
    expect((await l.beat()).status).toBe(200);
  });
});

describe('expiry and stop', () => {
  it('evicts a session with no beat for max(60, beat_interval x 6) seconds', async () => {
    const l = await live({ heartbeat_interval: 5 });
    await l.beat();
    clock.advance(59_000);
    expect((await l.beat()).status).toBe(200); // expiry was reset by the previous beat
    clock.advance(60_001);
    expect((await l.beat()).body).toEqual({ detail: 'rejected' });
  });

  it('stop with the right token closes the session; a wrong token or a gone session answers 401', async () => {
    const l = await live();
    const wrong = await l.c.post('/api/client/heartbeat/stop', { session: l.session, token: 'TT' + 'f'.repeat(32) });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ detail: 'Invalid heartbeat token' });
    const ok = await l.c.post('/api/client/heartbeat/stop', { session: l.session, token: l.token });
    expect(ok.body).toEqual({ success: true });
    expect((await l.c.post('/api/client/heartbeat/stop', { session: l.session, token: l.token })).status).toBe(401);
    expect((await l.beat()).body).toEqual({ detail: 'rejected' });
  });
});

describe('require_heartbeat (docs/protocol.md 2, docs/spec.md "Session alive")', () => {
  it('first auth call is free; later ones need a live heartbeat session', async () => {
    const f = await appFixture(t, { require_heartbeat: true, heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    const blocked = await c.post('/api/client/license', { session, license: key, hwid: hwid() });
    expect(blocked.status).toBe(403);
    expect(blocked.body).toEqual({ detail: 'Heartbeat session required. Call /heartbeat/start first.' });
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200); // zero beats: alive
    clock.advance(50_000); // far past 3 intervals, inside the 60 s expiry: zero beats is still alive
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    const beat = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
    });
    expect(beat.status).toBe(200);
    clock.advance(15_001); // more than beat_interval x 3 since the last beat
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(403);
  });
});
