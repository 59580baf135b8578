// Streams of a credential that stops being valid are closed within a second (docs/protocol.md 11.35): an
// API token revoked or reaching its expiry, a sign-in session signed out. An SSE response ends (the
// body is done), a WebSocket closes with 1008; merely sending nothing more would not pass.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

let t: TestServer;
let owner: Api;
let appId: string;
beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  appId = (await owner.post('/api/apps', { name: 'Streams' })).body.id as string;
});
afterAll(() => t.close());

/** An SSE stream of the app; `ended` resolves (with the time) when the server ends the response. */
async function sse(token: string): Promise<{ status: number; ended: Promise<number> }> {
  const res = await fetch(`${t.base}/api/apps/${appId}/events`, { headers: { authorization: `Bearer ${token}` } });
  const reader = res.body!.getReader();
  const ended = (async () => {
    for (;;) {
      const { done } = await reader.read().catch(() => ({ done: true }));
      if (done) return Date.now();
    }
  })();
  return { status: res.status, ended };
}

async function token(body: Record<string, unknown> = {}): Promise<{ id: string; token: string }> {
  const r = await owner.post('/api/tokens', { name: `t${Date.now()}`, scopes: ['logs:read', 'apps:read'], ...body });
  expect(r.status).toBe(201);
  return r.body as { id: string; token: string };
}

describe('streams of revoked or expired credentials are closed', () => {
  it('an API token revoked: its SSE response ends and its socket closes (1008) within a second', async () => {
    const tk = await token();
    const stream = await sse(tk.token);
    expect(stream.status).toBe(200);
    const ws = await Subscriber.open(t.base, tk.token);
    await ws.subscribe(appId);
    const revokedAt = Date.now();
    expect((await owner.delete(`/api/tokens/${tk.id}`)).status).toBe(200);
    expect((await stream.ended) - revokedAt).toBeLessThan(1000);
    const closed = await ws.closed;
    expect(closed.code).toBe(1008);
    expect(Date.now() - revokedAt).toBeLessThan(1500);
  });

  it('an API token reaching its expiry: its streams end within a second of it (no signal but the time)', async () => {
    const expires = new Date(Date.now() + 2500);
    const tk = await token({ expires_at: expires.toISOString() });
    const stream = await sse(tk.token);
    expect(stream.status).toBe(200);
    const ws = await Subscriber.open(t.base, tk.token);
    await ws.subscribe(appId);
    const ended = await stream.ended;
    expect(ended).toBeGreaterThanOrEqual(expires.getTime());
    expect(ended - expires.getTime()).toBeLessThan(1000);
    expect((await ws.closed).code).toBe(1008);
    expect(Date.now() - expires.getTime()).toBeLessThan(1000);
  });

  it('a sign-in session signed out: its SSE response ends', async () => {
    const me = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    const stream = await sse(me.token!);
    expect(stream.status).toBe(200);
    const at = Date.now();
    expect((await me.post('/api/auth/logout')).status).toBe(200);
    expect((await stream.ended) - at).toBeLessThan(1000);
  });
});
