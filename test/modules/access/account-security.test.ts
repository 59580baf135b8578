// The caller's own security (the dashboard's Account > Security page): its live sessions with
// browser and address, "sign out everywhere" (every session but this one), ending one session, and
// its sign-ins. None of it is reachable with an API token.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { createAccount, startTestServer, type TestServer } from '../../helpers/server.js';

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';
const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

let t: TestServer;

async function signIn(username: string, password: string, ua: string): Promise<Api> {
  const r = await new Api(t.base).post(
    '/api/auth/login',
    { username, password },
    { token: '', headers: { 'user-agent': ua } },
  );
  expect(r.status).toBe(200);
  return new Api(t.base, r.body.token);
}

beforeAll(async () => {
  t = await startTestServer();
  await createAccount(t, { username: 'secowner', password: 'sec-pass-12' });
});
afterAll(() => t.close());

describe('Account > Security', () => {
  it('lists live sessions with browser, address and which one is this; ends one, then every other', async () => {
    const here = await signIn('secowner', 'sec-pass-12', FIREFOX);
    const phone = await signIn('secowner', 'sec-pass-12', CHROME);
    const third = await signIn('secowner', 'sec-pass-12', 'curl/8.5.0');
    const state = (await here.get('/api/account/security')).body;
    expect(state).toMatchObject({ two_factor: false, recovery_codes_left: 0, two_factor_required: false });
    expect(state.require_two_factor).toBe(false); // an owner sees its policy
    expect(state.sessions).toHaveLength(3);
    const current = state.sessions.filter((s: { current: boolean }) => s.current);
    expect(current).toEqual([expect.objectContaining({ browser: 'Firefox 128 on Linux', ip: '127.0.0.1' })]);
    const chrome = state.sessions.find((s: { browser: string }) => s.browser === 'Chrome 131 on Windows');
    expect(chrome).toBeDefined();
    expect(state.sessions.map((s: { browser: string }) => s.browser)).toContain('curl 8.5.0');

    expect((await here.delete(`/api/account/sessions/${chrome.id}`)).status).toBe(200);
    expect((await phone.get('/api/auth/me')).status).toBe(401);
    const again = await here.delete(`/api/account/sessions/${chrome.id}`);
    expect([again.status, again.body]).toEqual([404, { detail: 'Session not found' }]);

    const everywhere = await here.delete('/api/account/sessions');
    expect(everywhere.body).toEqual({ revoked: 1 });
    expect((await third.get('/api/auth/me')).status).toBe(401);
    expect((await here.get('/api/auth/me')).status).toBe(200);
    expect((await here.get('/api/account/security')).body.sessions).toHaveLength(1);
  });

  it("lists the caller's sign-ins, failed ones too, newest first", async () => {
    await new Api(t.base).post('/api/auth/login', { username: 'secowner', password: 'wrong-pass-1' }, { token: '' });
    const api = await signIn('secowner', 'sec-pass-12', CHROME);
    const list = (await api.get('/api/account/sign-ins')).body;
    expect(list[0]).toMatchObject({ success: true, browser: 'Chrome 131 on Windows', ip: '127.0.0.1' });
    expect(list[1]).toMatchObject({ success: false, detail: 'Wrong password' });
    expect(Date.parse(list[0].time)).toBeGreaterThanOrEqual(Date.parse(list[1].time));
  });

  it('is out of reach of an API token', async () => {
    const api = await signIn('secowner', 'sec-pass-12', CHROME);
    const tok = (await api.post('/api/tokens', { name: 'x', scopes: TOKEN_ALL })).body.token;
    for (const path of ['/api/account/security', '/api/account/sign-ins'])
      expect((await api.get(path, { token: tok })).status).toBe(403);
    expect((await api.delete('/api/account/sessions', { token: tok })).status).toBe(403);
  });
});

const TOKEN_ALL = [
  'apps:read',
  'apps:write',
  'licenses:read',
  'licenses:write',
  'users:read',
  'users:write',
  'logs:read',
  'team:read',
  'team:write',
];
