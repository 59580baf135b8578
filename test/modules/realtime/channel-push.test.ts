// Pushes on the realtime channel, one server: every kind of revocation reaches the connected
// client (and only the clients it concerns) within a second of the dashboard call, closes the
// channel (4003) and ends the session; update_required follows force_update and the version;
// the dashboard's notice reaches every live client of the application.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid, type ClientApi } from '../../helpers/client.js';
import { openChannel, type ChannelClient, type ServerMessage } from '../../helpers/channel-client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);

interface Conn {
  c: ClientApi;
  ch: ChannelClient;
  session: string;
  ip: string;
  token: string;
  licenseId: string;
  /** The device the session was activated from (each connection its own). */
  hwid: string;
  userId?: string;
}

let userSeq = 0;
let deviceSeq = 0;
/** A client with a running heartbeat on the channel: license-only, or a registered user. */
async function connect(f: AppFixture, o: { user?: boolean; version?: string } = {}): Promise<Conn> {
  const [key] = await f.keys(1);
  const ip = nextIp();
  const c = f.client(ip);
  const session = await f.session(c);
  const device = hwid(`push-${++deviceSeq}`);
  let userId: string | undefined;
  if (o.user) {
    const username = `push-user-${++userSeq}`;
    expect(
      (await c.post('/api/client/register', { session, username, password: 'user-pass-1', license: key, hwid: device }))
        .status,
    ).toBe(200);
    const users = (await f.owner.get(`/api/apps/${f.app.id}/users`)).body as { id: string; username: string }[];
    userId = users.find((u) => u.username === username)!.id;
  } else {
    expect((await c.post('/api/client/license', { session, license: key, hwid: device })).status).toBe(200);
  }
  const lic = (await f.owner.get(`/api/apps/${f.app.id}/licenses?q=${encodeURIComponent(key!.slice(-4))}`)).body
    .items as { id: string; key_preview: string }[];
  const licenseId = lic.find((l) => l.key_preview.endsWith(key!.slice(-4)))!.id;
  const ch = await openChannel(t.base, session, { ip, ...(o.version ? { version: o.version } : {}) });
  const start = await ch.call('heartbeat/start', { system_id: SYS });
  expect(start.status).toBe(200);
  const beat = await ch.call('heartbeat', { token: start.body.token, system_id: SYS, beat_index: 1, code_hash: HASH });
  expect(beat.status).toBe(200);
  return { c, ch, session, ip, token: beat.body.new_token, licenseId, hwid: device, ...(userId ? { userId } : {}) };
}

/** Resolves when the condition holds; polls (the session ends just after the push). */
async function eventually(cond: () => Promise<boolean>, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The channel is still open and has received no push: a ping comes back as the very next message. */
async function untouched(x: Conn): Promise<void> {
  const seq = x.ch.send({ type: 'ping' });
  const m = await x.ch.next(() => true);
  expect(m).toMatchObject({ type: 'pong', re: seq });
}

interface RevokeRow {
  name: string;
  user?: boolean;
  reason: string;
  act(f: AppFixture, x: Conn): Promise<unknown>;
  /** The dashboard (or client) call's own status when not 200. */
  status?: number;
  /** What heartbeat/start answers once the session ended ('not_activated' unless the app itself is gone). */
  after?: { status: number; detail: string };
}

const ROWS: RevokeRow[] = [
  {
    name: 'key banned',
    reason: 'license_banned',
    act: (f, x) => f.owner.patch(`/api/licenses/${x.licenseId}/ban`, { banned: true }),
  },
  {
    name: 'key deleted (license-only)',
    reason: 'license_deleted',
    act: (f, x) => f.owner.delete(`/api/licenses/${x.licenseId}`),
  },
  {
    name: "key deleted (its user's session)",
    user: true,
    reason: 'license_deleted',
    act: (f, x) => f.owner.delete(`/api/licenses/${x.licenseId}`),
  },
  {
    name: 'key HWID reset',
    reason: 'hwid_reset',
    act: (f, x) => f.owner.post(`/api/licenses/${x.licenseId}/reset-hwid`),
  },
  {
    name: 'user frozen',
    user: true,
    reason: 'user_banned',
    act: (f, x) => f.owner.patch(`/api/users/${x.userId}/ban`, { banned: true }),
  },
  { name: 'user deleted', user: true, reason: 'user_deleted', act: (f, x) => f.owner.delete(`/api/users/${x.userId}`) },
  {
    name: 'user HWID reset',
    user: true,
    reason: 'hwid_reset',
    act: (f, x) => f.owner.post(`/api/users/${x.userId}/reset-hwid`),
  },
  {
    name: "the client's IP blacklisted",
    reason: 'blacklisted',
    act: (f, x) => f.owner.post(`/apps/${f.app.id}/bans`, { type: 'ip', value: x.ip }),
    after: { status: 403, detail: 'Access denied' },
  },
  {
    // The same admission as REST's gate (client/admission.ts): a banned device is refused on both.
    name: "the client's HWID blacklisted",
    reason: 'blacklisted',
    act: (f, x) => f.owner.post(`/apps/${f.app.id}/bans`, { type: 'hwid', value: x.hwid.toUpperCase() }),
  },
  {
    name: 'app disabled',
    reason: 'app_disabled',
    act: (f) => f.owner.patch(`/apps/${f.app.id}`, { enabled: false }),
    after: { status: 403, detail: 'Application disabled' },
  },
  {
    name: 'app deleted',
    reason: 'app_deleted',
    act: (f) => f.owner.delete(`/api/apps/${f.app.id}`),
    after: { status: 404, detail: 'Application not found' },
  },
  {
    name: 'session killed by a REST beat (debugger)',
    reason: 'session_killed',
    status: 403,
    act: (_f, x) =>
      x.c.post('/api/client/heartbeat', {
        session: x.session,
        token: x.token,
        system_id: SYS,
        beat_index: 2,
        code_hash: HASH,
        debugger_detected: true,
      }),
  },
];

describe('revocations', () => {
  it.each(ROWS)('$name: pushed within a second, the channel closed, the session ended', async (row) => {
    const f = await appFixture(t);
    const x = await connect(f, { user: row.user });
    // A bystander: same app, another key (and user): only app-wide revocations concern it.
    const other = await connect(f, { user: row.user });
    const started = Date.now();
    const revoked = x.ch.next('revoked');
    const r = (await row.act(f, x)) as { status: number };
    expect(r.status).toBe(row.status ?? 200);
    const m: ServerMessage = await revoked;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(m).toMatchObject({ type: 'revoked', reason: row.reason, detail: expect.any(String) });
    expect(await x.ch.closed).toEqual({ code: 4003, reason: row.reason });
    expect(x.ch.refused).toBeUndefined();

    const appWide = ['app_disabled', 'app_deleted'].includes(row.reason);
    if (appWide) expect((await other.ch.next('revoked')).reason).toBe(row.reason);
    else await untouched(other);

    // The heartbeat session is gone and the activation ended: only a new authentication continues.
    const expected = row.after ?? {
      status: 403,
      detail: 'Session not activated. Call /login, /register or /license first.',
    };
    await eventually(async () => {
      const r2 = await x.c.post('/api/client/heartbeat/start', { session: x.session, system_id: SYS });
      return r2.status === expected.status && r2.body.detail === expected.detail;
    });
    if (!row.after) {
      const beat = await x.c.post('/api/client/heartbeat', {
        session: x.session,
        token: x.token,
        system_id: SYS,
        beat_index: 5,
        code_hash: HASH,
      });
      expect(beat.body).toEqual({ detail: 'rejected' });
      const kills = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=heartbeat.kill`)).body;
      expect(kills.length).toBeGreaterThan(0);
    }
    other.ch.close();
  });

  it('unbanning a key or user, or a settings change that keeps the client allowed, pushes nothing', async () => {
    const f = await appFixture(t);
    const x = await connect(f, { user: true });
    await f.owner.patch(`/api/users/${x.userId}/ban`, { banned: false });
    await f.owner.patch(`/api/licenses/${x.licenseId}/ban`, { banned: false });
    await f.owner.patch(`/apps/${f.app.id}`, { description: 'changed', hwid_lock: true });
    await f.owner.post(`/api/licenses/${x.licenseId}/extend`, { value: 1, unit: 'days' });
    await untouched(x);
    x.ch.close();
  });
});

describe('update_required', () => {
  it('is pushed once per version while force_update is on and the client version differs; the channel stays', async () => {
    const f = await appFixture(t);
    const x = await connect(f, { version: '1.0' });
    const current = await connect(f, { version: '2.0' });
    const pushed = x.ch.next('update_required');
    await f.owner.patch(`/apps/${f.app.id}`, {
      force_update: true,
      version: '2.0',
      update_url: 'https://example.com/dl/2.0',
      update_message: 'Version 2.0 is out.',
    });
    expect((await pushed).detail).toEqual({
      message: 'Version 2.0 is out.',
      latest_version: '2.0',
      update_url: 'https://example.com/dl/2.0',
      force_update: true,
    });
    await untouched(current);
    // Another change of the same version does not repeat it; a newer version does.
    await f.owner.patch(`/apps/${f.app.id}`, { description: 'still 2.0' });
    await untouched(x);
    await f.owner.patch(`/apps/${f.app.id}`, { version: '2.1', update_message: '' });
    expect((await x.ch.next('update_required')).detail).toMatchObject({
      latest_version: '2.1',
      message: 'A new version is required.',
    });
    expect((await current.ch.next('update_required')).detail.latest_version).toBe('2.1');
    // The heartbeat goes on (force_update refuses new inits, not running sessions).
    expect(
      (await x.ch.call('heartbeat', { token: x.token, system_id: SYS, beat_index: 2, code_hash: HASH })).status,
    ).toBe(200);
    x.ch.close();
    current.ch.close();
  });

  it('is pushed right after the hello to a client that connects already outdated', async () => {
    const f = await appFixture(t);
    const x = await connect(f, { version: '1.0' });
    await f.owner.patch(`/apps/${f.app.id}`, { force_update: true, version: '3.0' });
    await x.ch.next('update_required');
    const ch2 = await openChannel(t.base, x.session, { ip: x.ip, version: '1.0' });
    expect(await ch2.next(() => true)).toMatchObject({
      seq: 1,
      type: 'update_required',
      detail: { latest_version: '3.0' },
    });
    ch2.close();
  });
});

describe('notice', () => {
  it('reaches every live client of the app and no other; audited; validated', async () => {
    const f = await appFixture(t);
    const g = await appFixture(t);
    const a = await connect(f);
    const b = await connect(f);
    const elsewhere = await connect(g);
    const r = await f.owner.post(`/api/apps/${f.app.id}/notice`, { message: 'Maintenance at 22:00 UTC ✓' });
    expect(r).toMatchObject({ status: 200, body: { success: true } });
    for (const x of [a, b])
      expect(await x.ch.next('notice')).toMatchObject({
        message: 'Maintenance at 22:00 UTC ✓',
        at: expect.stringMatching(/Z$/),
      });
    await untouched(elsewhere);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=app.notice`)).body;
    expect(logs).toHaveLength(1);
    for (const body of [
      {},
      { message: '' },
      { message: 'x'.repeat(4097) },
      { message: 'hi', extra: 1 },
      { message: 'a\u0000b' },
    ]) {
      expect((await f.owner.post(`/api/apps/${f.app.id}/notice`, body)).status, JSON.stringify(body)).toBe(422);
    }
    expect((await f.owner.post(`/api/apps/00000000-0000-4000-8000-000000000000/notice`, { message: 'x' })).status).toBe(
      404,
    );
    expect((await f.owner.post(`/api/apps/not-a-uuid/notice`, { message: 'x' })).status).toBe(404);
    for (const x of [a, b, elsewhere]) x.ch.close();
  });
});
