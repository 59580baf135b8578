// The license-key state table under concurrency: atomic claims, 409s, and rollbacks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';

let t: TestServer;
let paused: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  // Pauses every register for 1.5 s between claim and finalise, so a test can act in between.
  paused = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', FAULT_AFTER_CLAIM_MS: '1500' });
});
afterAll(async () => {
  await t.close();
  await paused.close();
});

describe('license claims', () => {
  it('50 concurrent registers for one key: exactly one wins, the rest get License key already used', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1);
    const clients = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const c = f.client(); // distinct IPs: neither the rate limit nor the IP lockout interferes
        return { c, session: await f.session(c), i };
      }),
    );
    const results = await Promise.all(
      clients.map(({ c, session, i }) =>
        c.post('/api/client/register', {
          session,
          username: `racer${i}`,
          password: 'pw-race-1',
          license: key,
          hwid: hwid(i),
        }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ detail: 'License key already used' });
    }
    const users = await f.sql('select username from end_users where app_id = $1', [f.app.id]);
    expect(users).toEqual([{ username: ok[0]!.body.user.username }]);
    const [k] = await f.sql('select status, used_by from license_keys where app_id = $1', [f.app.id]);
    expect(k).toEqual({ status: 'used', used_by: ok[0]!.body.user.username });
  });

  it('operations on one key take turns in its actor: a license call during a register waits, then sees the key used', async () => {
    // (A claim held by another process is answered 409 `License activation in progress, retry.`:
    // see the 'pending key' row of test/integration/client-auth.test.ts.)
    const f = await appFixture(paused);
    const [key] = await f.keys(1);
    const a = f.client();
    const order: string[] = [];
    const registering = a
      .post('/api/client/register', {
        session: await f.session(a),
        username: 'slow',
        password: 'pw-slow-1',
        license: key,
        hwid: hwid(),
      })
      .then((r) => {
        order.push('register');
        return r;
      });
    const b = f.client();
    const bs = await f.session(b);
    await waitForStatus(f, 'pending');
    const licensed = await b.post('/api/client/license', { session: bs, license: key, hwid: hwid('b') });
    order.push('license');
    expect((await registering).status).toBe(200);
    expect(order).toEqual(['register', 'license']);
    expect(licensed.status).toBe(200);
    const [k] = await f.sql('select status, used_by from license_keys where app_id = $1', [f.app.id]);
    expect(k).toEqual({ status: 'used', used_by: 'slow' });
  });

  it('a key whose state changed between claim and finalise answers 409 and is left as it is', async () => {
    const f = await appFixture(paused);
    const [key] = await f.keys(1);
    const a = f.client();
    const registering = a.post('/api/client/register', {
      session: await f.session(a),
      username: 'victim',
      password: 'pw-vic-1',
      license: key,
      hwid: hwid(),
    });
    await waitForStatus(f, 'pending');
    await f.sql(`update license_keys set status = 'banned', pending_since = null where app_id = $1`, [f.app.id]);
    const r = await registering;
    expect(r.status).toBe(409);
    expect(r.body).toEqual({ detail: 'License state changed mid-activation, please retry' });
    expect(await f.sql('select status from license_keys where app_id = $1', [f.app.id])).toEqual([
      { status: 'banned' },
    ]);
    expect(await f.sql('select 1 from end_users where app_id = $1', [f.app.id])).toEqual([]);
  });

  it('a deleted user leaves its key used; registering with it again binds the new user to the remaining time', async () => {
    const f = await appFixture(t);
    const [key] = await f.keys(1, { level: 3 });
    const a = f.client();
    const first = await a.post('/api/client/register', {
      session: await f.session(a),
      username: 'old',
      password: 'pw-old-1',
      license: key,
      hwid: hwid(),
    });
    await f.sql('delete from end_users where app_id = $1', [f.app.id]);
    await f.sql('update license_keys set user_id = null where app_id = $1', [f.app.id]);
    const b = f.client();
    const second = await b.post('/api/client/register', {
      session: await f.session(b),
      username: 'new',
      password: 'pw-new-1',
      license: key,
      hwid: hwid(),
    });
    expect(second.status).toBe(200);
    expect(second.body.user).toEqual({ username: 'new', level: 3, expires_at: first.body.user.expires_at });
  });
});

async function waitForStatus(f: Awaited<ReturnType<typeof appFixture>>, status: string): Promise<void> {
  // Polls the database (the observable effect of the claim); bounded.
  for (let i = 0; i < 200; i++) {
    const [k] = await f.sql('select status from license_keys where app_id = $1', [f.app.id]);
    if (k?.status === status) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`key never became ${status}`);
}
