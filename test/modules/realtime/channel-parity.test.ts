// Kill-condition parity: every heartbeat rule of docs/spec.md and docs/protocol.md 6 behaves the same whether the
// beats travel as REST calls or on the realtime channel (table-driven over both transports): the same
// answers, the same audit lines, the same end of the activation; on the channel a kill also closes
// it with `revoked` (session_killed).
import { createHmac } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid, type ClientApi } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';
import { openChannel, type ChannelClient } from '../../helpers/channel-client.js';

let t: TestServer;
/** Moved forward by the drift and expiry tests and back after each, so signed answers stay inside 300 s. */
const clock = new TestClock();
let advanced = 0;
const advance = (ms: number) => {
  advanced += ms;
  clock.advance(ms);
};
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' }, { clock });
});
afterAll(() => t.close());
afterEach(() => {
  clock.advance(-advanced);
  advanced = 0;
});

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);
type Transport = 'rest' | 'ws';

interface Live {
  f: AppFixture;
  c: ClientApi;
  ch: ChannelClient | undefined;
  session: string;
  token: string;
  index: number;
  /** One beat on the live's transport; the proof is checked on every 200. */
  beat(over?: Record<string, unknown>): Promise<{ status: number; body: any }>;
  rest(path: string, body: Record<string, unknown>): Promise<{ status: number; body: any }>;
}

async function live(transport: Transport, settings: Record<string, unknown> = {}): Promise<Live> {
  const f = await appFixture(t, settings);
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
  const ch =
    transport === 'ws' ? await openChannel(t.base, session, { ip: c.extraHeaders['x-forwarded-for'] }) : undefined;
  const call = async (op: string, body: Record<string, unknown>) => {
    if (ch) return ch.call(op, body);
    const r = await c.post(`/api/client/${op}`, { session, ...body });
    return { status: r.status, body: r.body };
  };
  const r = await call('heartbeat/start', { system_id: SYS });
  expect(r.status).toBe(200);
  expect(r.body.proof).toBe(createHmac('sha256', session).update(`kwhs1\n${SYS}\n${r.body.token}`).digest('base64'));
  const l: Live = {
    f,
    c,
    ch,
    session,
    token: r.body.token,
    index: 0,
    async beat(over = {}) {
      const index = (over.beat_index as number | undefined) ?? l.index + 1;
      const body: Record<string, unknown> = {
        token: l.token,
        system_id: SYS,
        beat_index: index,
        code_hash: HASH,
        ...over,
      };
      for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
      const res = await call('heartbeat', body);
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
    async rest(path, body) {
      const res = await c.post(path, { session, ...body });
      return { status: res.status, body: res.body };
    },
  };
  return l;
}

/** The beat kills; afterwards the session is gone on every transport and its activation ended. */
async function expectKilled(l: Live, over: Record<string, unknown>) {
  const r = await l.beat(over);
  expect(r.status).toBe(403);
  expect(r.body).toEqual({ detail: 'rejected' });
  if (l.ch) {
    // The kill reaches the channel as a push, then the server closes it.
    expect(await l.ch.next('revoked')).toMatchObject({ reason: 'session_killed' });
    expect((await l.ch.closed).code).toBe(4003);
  }
  const after = await l.rest('/api/client/heartbeat', {
    token: l.token,
    system_id: SYS,
    beat_index: l.index + 2,
    code_hash: HASH,
  });
  expect(after.body).toEqual({ detail: 'rejected' });
  const again = await l.rest('/api/client/heartbeat/start', { system_id: SYS });
  expect(again.body).toEqual({ detail: 'Session not activated. Call /login, /register or /license first.' });
  const logs = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=heartbeat.kill`)).body;
  expect(logs).toHaveLength(1);
  expect(logs[0].level).toBe('warning');
  return logs[0] as { detail: string };
}

interface KillRow {
  name: string;
  settings?: Record<string, unknown>;
  before?: Record<string, unknown>[];
  kill: Record<string, unknown>;
  detail: string;
}

const KILLS: KillRow[] = [
  {
    name: 'system_id differs from start',
    before: [{}],
    kill: { system_id: 'other-system' },
    detail: 'system_id differs from start',
  },
  {
    name: 'no code_hash on the first beat when nothing is pinned',
    kill: { code_hash: undefined },
    detail: 'no code_hash on the first beat',
  },
  {
    name: 'code_hash differs from the first beat',
    before: [{ code_size: 1000 }],
    kill: { code_hash: 'beef'.repeat(8) },
    detail: 'differs from the baseline',
  },
  {
    name: 'code_size differs from the first beat',
    before: [{ code_size: 1000 }, { code_size: 1000, code_hash: HASH.toUpperCase() }],
    kill: { code_size: 1001 },
    detail: 'differs from the baseline',
  },
  {
    name: 'code_hash differs from the pinned expected_binary_hash',
    settings: { expected_binary_hash: 'aa'.repeat(32) },
    kill: { code_hash: HASH },
    detail: 'pinned expected_binary_hash',
  },
  {
    name: 'debugger_detected with injection_detection on',
    kill: { debugger_detected: true },
    detail: 'debugger detected',
  },
];

describe.each<Transport>(['rest', 'ws'])('heartbeat rules over %s', (transport) => {
  it.each(KILLS)('kills: $name', async (row) => {
    const l = await live(transport, row.settings);
    for (const over of row.before ?? []) expect((await l.beat(over)).status).toBe(200);
    expect((await expectKilled(l, row.kill)).detail).toContain(row.detail);
  });

  it('kills on the third drift warning; a clean beat decays the counter; warnings are audited', async () => {
    const l = await live(transport, { heartbeat_interval: 5 });
    advance(13_000);
    expect((await l.beat()).status).toBe(200); // 1 (the start counts as the previous beat)
    advance(4_000);
    expect((await l.beat()).status).toBe(200); // clean: 0
    advance(13_000);
    await l.beat(); // 1
    advance(13_000);
    expect((await l.beat()).status).toBe(200); // 2
    const logs = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=client.heartbeat`)).body;
    expect(logs[0].detail).toContain('drift warning 2 of 3');
    advance(13_000);
    expect((await expectKilled(l, {})).detail).toContain('drift');
  });

  it('debugger_detected does not kill with injection_detection off', async () => {
    const l = await live(transport, { injection_detection: false });
    expect((await l.beat({ debugger_detected: true })).status).toBe(200);
  });

  it('refuses replays, stale, wrong and malformed tokens without killing or moving last_beat_index', async () => {
    const l = await live(transport);
    await l.beat();
    const stale = l.token;
    await l.beat();
    for (const over of [
      { beat_index: 2 },
      { beat_index: 1 },
      { token: stale, beat_index: 50 },
      { token: 'TT' + '0'.repeat(32), beat_index: 51 },
      { token: 'not-a-token', beat_index: 52 },
    ]) {
      expect(await l.beat(over), JSON.stringify(over)).toEqual({ status: 403, body: { detail: 'rejected' } });
    }
    const ok = await l.beat({ beat_index: 3 });
    expect(ok.status).toBe(200);
    expect(ok.body.beat_count).toBe(3);
    // docs/protocol.md 11.26: a session's refusals write one audit line a minute, the first one's.
    const refusals = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=client.heartbeat`)).body.map(
      (e: { detail: string }) => e.detail,
    );
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toContain('replayed beat_index');
    expect((await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=heartbeat.kill`)).body).toEqual([]);
    const other = await live(transport);
    expect((await other.beat({ token: stale })).status).toBe(403);
    const otherLines = (await other.f.owner.get(`/api/apps/${other.f.app.id}/logs?action=client.heartbeat`)).body;
    expect(otherLines.map((e: { detail: string }) => e.detail)).toEqual([
      expect.stringContaining('wrong, stale or malformed token'),
    ]);
  });

  it('validates the body the same way (422)', async () => {
    const l = await live(transport);
    for (const over of [
      { beat_index: 0 },
      { beat_index: 2 ** 31 + 1 },
      { beat_index: 1.5 },
      { code_hash: 'short' },
      { system_id: 'short' },
    ]) {
      const r = await l.beat(over);
      expect(r.status, JSON.stringify(over)).toBe(422);
      expect(r.body.detail[0].loc[0]).toBe('body');
    }
    expect((await l.beat({ beat_index: 2 ** 31 })).status).toBe(200);
  });

  it('a second start is 409; stop needs the right token and ends the session', async () => {
    const l = await live(transport);
    const call = (op: string, body: Record<string, unknown>) =>
      l.ch ? l.ch.call(op, body) : l.rest(`/api/client/${op}`, body);
    expect(await call('heartbeat/start', { system_id: SYS })).toEqual({
      status: 409,
      body: { detail: 'heartbeat session already exists for this nonce' },
    });
    expect(await call('heartbeat/stop', { token: 'TT' + 'f'.repeat(32) })).toEqual({
      status: 401,
      body: { detail: 'Invalid heartbeat token' },
    });
    expect(await call('heartbeat/stop', { token: l.token })).toEqual({ status: 200, body: { success: true } });
    if (l.ch) expect((await l.ch.closed).code).toBe(1000);
    expect(
      (await l.rest('/api/client/heartbeat', { token: l.token, system_id: SYS, beat_index: 1, code_hash: HASH })).body,
    ).toEqual({ detail: 'rejected' });
    const stops = (await l.f.owner.get(`/api/apps/${l.f.app.id}/logs?action=client.heartbeat.stop`)).body;
    expect(stops.map((e: { detail: string }) => e.detail)).toEqual([
      'Heartbeat stopped after 0 beats',
      '401 Invalid heartbeat token',
    ]);
  });

  it('evicts after max(60, 6 x beat_interval) s without an accepted beat; the channel closes at that moment (4008)', async () => {
    const l = await live(transport, { heartbeat_interval: 5 });
    expect((await l.beat()).status).toBe(200);
    advance(59_000);
    expect((await l.beat()).status).toBe(200); // the expiry was reset by the previous beat
    advance(60_001);
    if (l.ch) expect((await l.ch.closed).code).toBe(4008); // the channel's sweeper, within a second
    expect(
      (
        await l.rest('/api/client/heartbeat', {
          token: l.token,
          system_id: SYS,
          beat_index: l.index + 1,
          code_hash: HASH,
        })
      ).body,
    ).toEqual({ detail: 'rejected' });
  });

  it('require_heartbeat counts beats of this transport as alive', async () => {
    const f = await appFixture(t, { require_heartbeat: true, heartbeat_interval: 5 });
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    const ch =
      transport === 'ws' ? await openChannel(t.base, session, { ip: c.extraHeaders['x-forwarded-for'] }) : undefined;
    const call = async (op: string, body: Record<string, unknown>) =>
      ch ? ch.call(op, body) : c.post(`/api/client/${op}`, { session, ...body });
    const start = await call('heartbeat/start', { system_id: SYS });
    let token = start.body.token as string;
    for (let i = 1; i <= 3; i++) {
      advance(10_000); // each beat within 3 intervals of the previous one
      const b = await call('heartbeat', { token, system_id: SYS, beat_index: i, code_hash: HASH });
      expect(b.status).toBe(200);
      token = b.body.new_token;
      expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
    }
    advance(15_001); // more than beat_interval x 3 since the last beat
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(403);
    ch?.close();
  });
});
