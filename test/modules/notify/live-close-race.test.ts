// A dashboard socket that subscribes and closes at once (docs/protocol.md 11.24): the subscribe's
// continuation runs after the close and must touch nothing of the closed socket (uWS throws
// "Invalid access of closed uWS.WebSocket"), so no rejection escapes and the server goes on serving.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';
import { Subscriber } from '../../helpers/live-subscriber.js';

let t: TestServer;
const escaped: unknown[] = [];
const onRejection = (err: unknown) => escaped.push(err);
beforeAll(async () => {
  t = await startTestServer();
  process.on('unhandledRejection', onRejection);
});
afterAll(async () => {
  process.off('unhandledRejection', onRejection);
  await t.close();
});

describe('/api/ws subscribe and close at once', () => {
  it('50 sockets subscribing and closing in the same moment: nothing escapes, the server still answers', async () => {
    const owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    const appId = (await owner.post('/api/apps', { name: 'Racy' })).body.id as string;
    const subs = await Promise.all(Array.from({ length: 50 }, () => Subscriber.open(t.base, owner.token)));
    for (const s of subs) {
      s.ws.send(JSON.stringify({ type: 'subscribe', app_id: appId }));
      s.ws.terminate();
    }
    await Promise.all(subs.map((s) => s.closed));
    // A subscribe sent after them is answered after theirs ran (one pool, first come first served).
    const last = await Subscriber.open(t.base, owner.token);
    last.ws.send(JSON.stringify({ type: 'subscribe', app_id: appId }));
    expect(await last.next((f) => f.type === 'subscribed')).toMatchObject({ app_id: appId });
    await new Promise((r) => setImmediate(r));
    expect(escaped.map(String)).toEqual([]);
    last.ws.close();
    expect((await owner.get('/api/auth/me')).status).toBe(200);
  });
});
