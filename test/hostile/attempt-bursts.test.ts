// Attempt limits under concurrency (docs/protocol.md 11.31), one process: a burst of parallel wrong
// passwords or two-factor codes is checked at most `limit` times (401), the rest answer 429, and
// the lock then holds for a correct attempt too. Per name (each guess from its own address) and
// per address (each guess on its own name). The cluster test (test/e2e) does the same across workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { createAccount, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, nextIp, type AppFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';
import { totp } from '../helpers/totp.js';
import { clientLoginBurst, dashboardBurst, expectLimited, freshIp } from '../helpers/bursts.js';

let t: TestServer;
let f: AppFixture;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t, { portal_enabled: true });
}, 120_000);
afterAll(() => t.close());

const BURST = 60;

async function registered(username: string, password = 'right-pass-1'): Promise<void> {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  const r = await c.post('/api/client/register', { session, username, password, license: key, hwid: hwid(username) });
  expect(r.status).toBe(200);
}

describe('dashboard sign-in', () => {
  it('60 parallel wrong passwords for one name: at most 5 are checked (401), the rest 429, then the right one 429', async () => {
    await createAccount(t, { username: 'burst-pass', password: 'right-pass-1' });
    const statuses = await dashboardBurst(
      [t.base],
      BURST,
      () => ({ username: 'burst-pass', password: 'wrong' }),
      freshIp,
    );
    expectLimited(statuses, 401, 5);
    const right = await dashboardBurst(
      [t.base],
      1,
      () => ({ username: 'burst-pass', password: 'right-pass-1' }),
      freshIp,
    );
    expect(right).toEqual([429]);
  });

  it('60 parallel wrong two-factor codes for one account: at most 5 are 401; the correct code then gets 429', async () => {
    await createAccount(t, { username: 'burst-2fa', password: 'right-pass-1' });
    const api = await new Api(t.base).signIn('burst-2fa', 'right-pass-1');
    const secret = (await api.post('/api/auth/2fa/setup')).body.secret as string;
    expect((await api.post('/api/auth/2fa/enable', { code: totp(secret) })).status).toBe(200);
    const wrong = String((Number(totp(secret)) + 1) % 1_000_000).padStart(6, '0');
    const statuses = await dashboardBurst(
      [t.base],
      BURST,
      () => ({ username: 'burst-2fa', password: 'right-pass-1', otp: wrong }),
      freshIp,
    );
    expectLimited(statuses, 401, 5);
    const right = await dashboardBurst(
      [t.base],
      1,
      () => ({ username: 'burst-2fa', password: 'right-pass-1', otp: totp(secret) }),
      freshIp,
    );
    expect(right).toEqual([429]);
  });

  it('60 parallel wrong passwords from one address on 60 names: at most 20 (the address limit) are 401', async () => {
    const ip = nextIp();
    const statuses = await dashboardBurst(
      [t.base],
      BURST,
      (i) => ({ username: `nobody-${i}`, password: 'wrong' }),
      () => ip,
    );
    expectLimited(statuses, 401, 20);
  });

  it('attempts that succeed give their reservation back: rounds of 5 parallel right passwords all sign in', async () => {
    await createAccount(t, { username: 'burst-ok', password: 'right-pass-1' });
    // Sequentially after the burst, the name is not locked: nothing was kept for successes.
    for (let round = 0; round < 2; round++) {
      const ok = await dashboardBurst([t.base], 5, () => ({ username: 'burst-ok', password: 'right-pass-1' }), freshIp);
      expect(ok).toEqual([200, 200, 200, 200, 200]);
    }
    const wrong = await dashboardBurst([t.base], 4, () => ({ username: 'burst-ok', password: 'wrong' }), freshIp);
    expect(wrong).toEqual([401, 401, 401, 401]);
    expect(
      await dashboardBurst([t.base], 1, () => ({ username: 'burst-ok', password: 'right-pass-1' }), freshIp),
    ).toEqual([200]);
  });
});

describe('portal sign-in', () => {
  it('60 parallel wrong passwords for one user: at most 10 are 401, the rest 429', async () => {
    await registered('portal-burst');
    const statuses = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const r = await new Api(t.base).post(
          '/api/portal/login',
          { api_key: f.app.api_key, username: 'portal-burst', password: 'wrong-pass-1' },
          { token: '', headers: { 'x-forwarded-for': nextIp() } },
        );
        return r.status;
      }),
    );
    expectLimited(statuses, 401, 10);
  });
});

describe('client login', () => {
  it('60 parallel wrong passwords for one user (each from its own address): at most 10 are 401, the rest 429', async () => {
    await registered('client-burst');
    const statuses = await clientLoginBurst([t.base], f.app.api_key, BURST, () => 'client-burst', freshIp);
    expectLimited(statuses, 401, 10);
  });

  it('60 parallel wrong logins from one address on 60 names: at most 10 are 401', async () => {
    const ip = nextIp();
    const statuses = await clientLoginBurst(
      [t.base],
      f.app.api_key,
      BURST,
      (i) => `ghost-${i}`,
      () => ip,
    );
    expectLimited(statuses, 401, 10);
  });
});
