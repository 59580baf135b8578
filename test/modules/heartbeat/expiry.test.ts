// Expiry while running (docs/protocol.md "Expiry while running"): a live heartbeat session ends when
// its key or its end user reaches expires_at, as a kill with the reason `expired`: the channel client
// is pushed `revoked` / `expired` within a second of the expiry, a REST client's next beat is refused,
// the kill is logged; a key extended in time goes on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../../helpers/fixture.js';
import { hwid, type ClientApi } from '../../helpers/client.js';
import { openChannel, type ChannelClient } from '../../helpers/channel-client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

const SYS = 'system-0001';
const HASH = 'c0de'.repeat(8);

interface Live {
  c: ClientApi;
  session: string;
  licenseId: string;
  userId?: string;
  token: string;
}

let seq = 0;
/** An activated client (license-only, or a registered user) with a started and once-beaten heartbeat. */
async function activate(
  f: AppFixture,
  o: { user?: boolean; channel?: boolean } = {},
): Promise<Live & { ch?: ChannelClient }> {
  const [key] = await f.keys(1);
  const ip = nextIp();
  const c = f.client(ip);
  const session = await f.session(c);
  let userId: string | undefined;
  if (o.user) {
    const username = `expiring-${++seq}`;
    const r = await c.post('/api/client/register', {
      session,
      username,
      password: 'user-pass-1',
      license: key,
      hwid: hwid(),
    });
    expect(r.status).toBe(200);
    userId = (
      await f.sql<{ id: string }>('select id from end_users where app_id = $1 and username = $2', [f.app.id, username])
    )[0]!.id;
  } else {
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid() })).status).toBe(200);
  }
  const [row] = await f.sql<{ id: string }>(
    `select id from license_keys where app_id = $1 and status = 'used' and id <> all($2::uuid[]) order by created_at desc limit 1`,
    [f.app.id, used],
  );
  used.push(row!.id);
  let token: string;
  let ch: ChannelClient | undefined;
  if (o.channel) {
    ch = await openChannel(t.base, session, { ip });
    const start = await ch.call('heartbeat/start', { system_id: SYS });
    expect(start.status).toBe(200);
    const beat = await ch.call('heartbeat', {
      token: start.body.token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
    });
    expect(beat.status).toBe(200);
    token = beat.body.new_token as string;
  } else {
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    const beat = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: SYS,
      beat_index: 1,
      code_hash: HASH,
    });
    expect(beat.status).toBe(200);
    token = beat.body.new_token as string;
  }
  return { c, session, licenseId: row!.id, token, ...(userId ? { userId } : {}), ...(ch ? { ch } : {}) };
}
const used: string[] = [];

/** Sets a record's expiry `ms` from now (the database's clock is this machine's) and returns it. */
async function expireIn(f: AppFixture, table: 'license_keys' | 'end_users', id: string, ms: number): Promise<number> {
  const at = Date.now() + ms;
  await f.sql(`update ${table} set expires_at = $1 where id = $2`, [new Date(at), id]);
  return at;
}

async function eventually(cond: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a session ends when its key or user expires', () => {
  it('a channel client of a key is pushed revoked/expired within a second of expires_at; the kill is logged', async () => {
    const f = await appFixture(t);
    const x = await activate(f, { channel: true });
    const bystander = await activate(f, { channel: true });
    const revoked = x.ch!.next('revoked');
    const at = await expireIn(f, 'license_keys', x.licenseId, 1200);
    const m = await revoked;
    const late = Date.now() - at;
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(1000);
    expect(m).toMatchObject({ type: 'revoked', reason: 'expired', detail: 'License expired' });
    expect(await x.ch!.closed).toEqual({ code: 4003, reason: 'expired' });
    // The bystander's key did not expire: its channel still answers a ping with nothing before it.
    const ping = bystander.ch!.send({ type: 'ping' });
    expect(await bystander.ch!.next(() => true)).toMatchObject({ type: 'pong', re: ping });
    await eventually(async () => {
      const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=heartbeat.kill`)).body as { detail: string }[];
      return logs.some((l) => l.detail === 'Session killed: expired');
    });
    bystander.ch!.close();
  });

  it("a REST client's next beat after the expiry is refused (403 rejected), and grace does not cover it", async () => {
    const f = await appFixture(t, { grace_hours: 24 });
    const x = await activate(f);
    const at = await expireIn(f, 'license_keys', x.licenseId, 600);
    await eventually(async () => {
      const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=heartbeat.kill`)).body as { detail: string }[];
      return logs.some((l) => l.detail === 'Session killed: expired');
    });
    expect(Date.now()).toBeGreaterThanOrEqual(at);
    const beat = await x.c.post('/api/client/heartbeat', {
      session: x.session,
      token: x.token,
      system_id: SYS,
      beat_index: 2,
      code_hash: HASH,
    });
    expect(beat.status).toBe(403);
    expect(beat.body).toEqual({ detail: 'rejected' });
    // Only a new activation continues, and it answers the expiry.
    const again = await x.c.post('/api/client/heartbeat/start', { session: x.session, system_id: SYS });
    expect(again.body.detail).toBe('Session not activated. Call /login, /register or /license first.');
  });

  it("an end user's own expiry ends its session (revoked/expired on the channel)", async () => {
    const f = await appFixture(t);
    const x = await activate(f, { user: true, channel: true });
    const revoked = x.ch!.next('revoked');
    const at = await expireIn(f, 'end_users', x.userId!, 800);
    const m = await revoked;
    expect(Date.now() - at).toBeLessThan(1000);
    expect(m).toMatchObject({ type: 'revoked', reason: 'expired' });
  });

  it('a key extended before its expiry keeps its session', async () => {
    const f = await appFixture(t);
    const x = await activate(f, { channel: true });
    const at = await expireIn(f, 'license_keys', x.licenseId, 1500);
    // Extended through the API (30 days more) well before the old expiry.
    const r = await f.owner.post(`/api/licenses/${x.licenseId}/extend`, { value: 30, unit: 'days' });
    expect(r.status).toBe(200);
    const [row] = await f.sql<{ expires_at: Date }>('select expires_at from license_keys where id = $1', [x.licenseId]);
    expect(row!.expires_at.getTime()).toBeGreaterThan(at + 29 * 86_400_000);
    // A second key of the same app expiring after the old instant proves the watch looked past it.
    const y = await activate(f, { channel: true });
    const yRevoked = y.ch!.next('revoked');
    await expireIn(f, 'license_keys', y.licenseId, 1700);
    expect((await yRevoked).reason).toBe('expired');
    const ping = x.ch!.send({ type: 'ping' });
    expect(await x.ch!.next(() => true)).toMatchObject({ type: 'pong', re: ping });
    const beat = await x.ch!.call('heartbeat', { token: x.token, system_id: SYS, beat_index: 2, code_hash: HASH });
    expect(beat.status).toBe(200);
    x.ch!.close();
  });
});
