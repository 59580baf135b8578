// DRAIN_LINGER_MS (docs/multi-host.md "Rolling upgrades"): on shutdown new connections are refused at
// once, while a connection a balancer already holds is still answered, its answer closing it, so the
// balancer never writes a request into a connection the server is closing (an unsigned 502).
import net from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer | undefined;
afterAll(() => t?.close());

/** One HTTP/1.1 request on an open connection; resolves with the raw head of its answer. */
function get(socket: net.Socket, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      resolve(buf.slice(0, end));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: kw\r\n\r\n`);
  });
}

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });

it('after SIGTERM, an open keep-alive connection is still served and then closed; new ones are refused', async () => {
  t = await startTestServer({ DRAIN_LINGER_MS: '3000' });
  const port = t.server.port;
  const pooled = net.connect(port, '127.0.0.1');
  await new Promise((r) => pooled.once('connect', r));
  expect(await get(pooled, '/healthz')).toMatch(/^HTTP\/1\.1 200/);

  const stopped = t.server.shutdown('test');
  // No event says the listener is closed: poll until a new connection is refused.
  while (!(await refused(port))) await new Promise((r) => setTimeout(r, 20));
  const closed = new Promise((r) => pooled.once('close', r));
  const head = await get(pooled, '/healthz');
  expect(head).toMatch(/^HTTP\/1\.1 200/);
  expect(head.toLowerCase()).toContain('connection: close');
  await closed;
  await stopped;
});
