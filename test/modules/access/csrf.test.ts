// CSRF defence of the web dashboard (docs/dashboard.md "Sign-in and CSRF"): a write the kw_session
// cookie authenticates must carry an Origin (or Referer) of the server itself or PUBLIC_URL; a
// Bearer call needs none; a sign-in naming a foreign origin is refused too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';

const REFUSED = { detail: 'Cross-site request refused' };

describe('cookie-authenticated writes and their origin', () => {
  let t: TestServer;
  let host: string;
  let cookie: string;
  let token: string;

  beforeAll(async () => {
    t = await startTestServer({ PUBLIC_URL: 'https://licensing.example.com' });
    host = new URL(t.base).host;
    const r = await fetch(`${t.base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(OWNER),
    });
    expect(r.status).toBe(200);
    token = ((await r.json()) as { token: string }).token;
    cookie = `kw_session=${token}`;
  });
  afterAll(() => t.close());

  const createApp = (headers: Record<string, string>) =>
    fetch(`${t.base}/api/apps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ name: 'csrf' }),
    });

  it("accepts a cookie write from the server's own origin", async () => {
    const r = await createApp({ cookie, origin: `http://${host}` });
    expect(r.status).toBe(200);
  });

  it('accepts a cookie write whose Referer is the server itself when no Origin is sent', async () => {
    const r = await createApp({ cookie, referer: `http://${host}/dashboard/apps` });
    expect(r.status).toBe(200);
  });

  it('accepts a cookie write from PUBLIC_URL (a proxy that rewrote Host)', async () => {
    const r = await createApp({ cookie, origin: 'https://licensing.example.com' });
    expect(r.status).toBe(200);
  });

  it('refuses a cookie write from another origin, and nothing is created', async () => {
    const before = ((await (await fetch(`${t.base}/api/apps`, { headers: { cookie } })).json()) as unknown[]).length;
    for (const origin of [
      'https://evil.example',
      `http://${host}.evil.example`,
      'null',
      `http://${host.replace(/:\d+$/, ':1')}`,
    ]) {
      const r = await createApp({ cookie, origin });
      expect(r.status, origin).toBe(403);
      expect(await r.json()).toEqual(REFUSED);
    }
    const r = await createApp({ cookie, referer: 'https://evil.example/page' });
    expect(r.status).toBe(403);
    const after = ((await (await fetch(`${t.base}/api/apps`, { headers: { cookie } })).json()) as unknown[]).length;
    expect(after).toBe(before);
  });

  it('refuses a cookie write that names no origin at all', async () => {
    const r = await createApp({ cookie });
    expect(r.status).toBe(403);
    expect(await r.json()).toEqual(REFUSED);
  });

  it('checks every write method: PATCH, PUT and DELETE too', async () => {
    const app = (await (await createApp({ authorization: `Bearer ${token}` })).json()) as { id: string };
    const foreign = { cookie, origin: 'https://evil.example', 'content-type': 'application/json' };
    const patch = await fetch(`${t.base}/api/apps/${app.id}`, {
      method: 'PATCH',
      headers: foreign,
      body: JSON.stringify({ enabled: false }),
    });
    const put = await fetch(`${t.base}/api/apps/${app.id}/hashes`, {
      method: 'PUT',
      headers: foreign,
      body: JSON.stringify({ hashes: [] }),
    });
    const del = await fetch(`${t.base}/api/apps/${app.id}`, {
      method: 'DELETE',
      headers: { cookie, origin: 'https://evil.example' },
    });
    expect([patch.status, put.status, del.status]).toEqual([403, 403, 403]);
    const still = await fetch(`${t.base}/api/apps/${app.id}`, { headers: { cookie } });
    expect(((await still.json()) as { enabled: boolean }).enabled).toBe(true);
  });

  it('lets cookie reads through without an origin (GET cannot change anything)', async () => {
    const r = await fetch(`${t.base}/api/auth/me`, { headers: { cookie } });
    expect(r.status).toBe(200);
  });

  it('does not check Bearer writes, which another site cannot send', async () => {
    const r = await createApp({ authorization: `Bearer ${token}` });
    expect(r.status).toBe(200);
  });

  it('refuses a sign-in from a foreign origin (login CSRF) but not one without an origin', async () => {
    const login = (headers: Record<string, string>) =>
      fetch(`${t.base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(OWNER),
      });
    const foreign = await login({ origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('set-cookie')).toBeNull();
    expect((await login({})).status).toBe(200);
    expect((await login({ origin: `http://${host}` })).status).toBe(200);
  });

  it('answers an unauthenticated write 401 as before (no cookie, no token)', async () => {
    const r = await createApp({ origin: 'https://evil.example' });
    expect(r.status).toBe(401);
  });
});
