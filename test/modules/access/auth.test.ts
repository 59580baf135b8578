import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
let api: Api;

beforeAll(async () => {
  t = await startTestServer({
    DEVELOPER_EMAILS: 'dev@example.com',
    DEVELOPER_USERNAME: 'devops',
    DEVELOPER_PASSWORD: 'dev-pass-123',
  });
  api = new Api(t.base);
});
afterAll(() => t.close());

describe('dashboard sign-in (docs/protocol.md 7)', () => {
  it('bootstraps the owner from OWNER_USERNAME/OWNER_PASSWORD and signs in with a bearer token and an HttpOnly cookie', async () => {
    const r = await api.post('/api/auth/login', OWNER);
    expect(r.status).toBe(200);
    expect(r.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(r.body.account).toMatchObject({ username: 'owner', role: 'owner', parent_id: null });
    expect(r.body.account.password_hash).toBeUndefined();
    const cookie = r.headers.get('set-cookie')!;
    expect(cookie).toContain(`kw_session=${r.body.token}`);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);

    const viaBearer = await api.get('/api/auth/me', { token: r.body.token });
    expect(viaBearer.status).toBe(200);
    expect(viaBearer.body.account.username).toBe('owner');
    const viaCookie = await api.get('/api/auth/me', {
      token: '',
      headers: { cookie: `theme=dark; kw_session=${r.body.token}` },
    });
    expect(viaCookie.status).toBe(200);
  });

  it('answers 401 without, or with a bad, token', async () => {
    expect((await api.get('/api/auth/me')).status).toBe(401);
    const r = await api.get('/api/auth/me', { token: 'x'.repeat(43) });
    expect(r.status).toBe(401);
    expect(r.body).toEqual({ detail: 'Not authenticated' });
  });

  it('creates the developer from DEVELOPER_USERNAME with the first reserved email, as a super-user', async () => {
    const r = await api.post('/api/auth/login', { username: 'devops', password: 'dev-pass-123' });
    expect(r.status).toBe(200);
    expect(r.body.account).toMatchObject({ role: 'developer', email: 'dev@example.com' });
  });

  it('logout revokes the session', async () => {
    const s = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    expect((await s.post('/api/auth/logout')).status).toBe(200);
    expect((await s.get('/api/auth/me')).status).toBe(401);
  });

  it('unknown user and wrong password get the same 401', async () => {
    const unknown = await api.post('/api/auth/login', { username: 'nobody-here', password: 'whatever-1' });
    const wrong = await api.post('/api/auth/login', { username: 'devops', password: 'wrong-pass-1' });
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(unknown.body).toEqual({ detail: 'Invalid username or password' });
    expect(wrong.raw.equals(unknown.raw)).toBe(true);
  });

  it('locks a username for 15 minutes after 5 failures in 15 minutes, even for the right password', async () => {
    await createAccount(t, { username: 'lockme', password: 'right-pass-1' });
    for (let i = 1; i <= 5; i++) {
      const r = await api.post('/api/auth/login', { username: 'lockme', password: `wrong-${i}-pass` });
      expect(r.status, `attempt ${i}`).toBe(401);
    }
    const locked = await api.post('/api/auth/login', { username: 'lockme', password: 'right-pass-1' });
    expect(locked.status).toBe(429);
    expect(locked.body).toEqual({ detail: 'Too many failed attempts, try again later.' });
    const retry = Number(locked.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(890);
    expect(retry).toBeLessThanOrEqual(900);
    // Another username is unaffected.
    expect((await api.post('/api/auth/login', OWNER)).status).toBe(200);
  });

  it('rejects unknown fields and missing fields with 422', async () => {
    const r = await api.post('/api/auth/login', { username: 'owner', password: 'x', extra: 1 });
    expect(r.status).toBe(422);
    expect(r.body.detail).toContainEqual({
      loc: ['body', 'extra'],
      msg: 'Extra inputs are not permitted',
      type: 'extra_forbidden',
    });
    const missing = await api.post('/api/auth/login', { username: 'owner' });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].loc).toEqual(['body', 'password']);
  });
});

describe('own password change', () => {
  it('checks the current password and the policy, then revokes other sessions but keeps this one', async () => {
    const user = { username: 'changer', password: 'first-pass-1' };
    await createAccount(t, user);
    const a = await new Api(t.base).signIn(user.username, user.password);
    const b = await new Api(t.base).signIn(user.username, user.password);

    const wrong = await a.post('/api/auth/password', { current_password: 'nope-nope-1', password: 'second-pass-2' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'Current password is incorrect' });

    const short = await a.post('/api/auth/password', { current_password: user.password, password: 'short1' });
    expect(short.status).toBe(422);
    expect(short.body.detail[0].loc).toEqual(['body', 'password']);
    const lettersOnly = await a.post('/api/auth/password', {
      current_password: user.password,
      password: 'onlyletters',
    });
    expect(lettersOnly.status).toBe(422);

    const ok = await a.post('/api/auth/password', { current_password: user.password, password: 'second-pass-2' });
    expect(ok.status).toBe(200);
    expect((await a.get('/api/auth/me')).status).toBe(200);
    expect((await b.get('/api/auth/me')).status).toBe(401);
    expect((await api.post('/api/auth/login', user)).status).toBe(401);
    expect((await api.post('/api/auth/login', { ...user, password: 'second-pass-2' })).status).toBe(200);
  });
});
