// The pieces of test/helpers/models-harness.ts that work before the server side of docs/protocol.md 12 exists:
// the probe that tells whether the server has the licensing models, and the proxy through which the
// SDK tests see the models server go down and come back.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restartableProxy, serverHasModels } from '../helpers/models-harness.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const listen = (s: net.Server) =>
  new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as net.AddressInfo).port)));
const get = (port: number) =>
  new Promise<string>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      })
      .on('error', (err: NodeJS.ErrnoException) => reject(err));
  });

describe('models harness', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.close());

  it('serverHasModels answers what the server does (404 for /api/client/trial: not yet)', async () => {
    const res = await fetch(`${server.base}/api/client/trial`, { method: 'POST', body: '{}' });
    expect(await serverHasModels(server.base)).toBe(res.status !== 404);
  });

  it('the restart proxy forwards to the current port, resets connections while there is none', async () => {
    const upstream = http.createServer((_req, res) => res.end('up'));
    const port = await listen(upstream);
    const proxy = restartableProxy();
    const via = await listen(proxy.server);
    try {
      proxy.point(port);
      expect(await get(via)).toBe('up');
      proxy.point(undefined);
      await expect(get(via)).rejects.toMatchObject({ code: 'ECONNRESET' });
      proxy.point(port);
      expect(await get(via)).toBe('up');
    } finally {
      proxy.point(undefined);
      await new Promise((r) => proxy.server.close(r));
      await new Promise((r) => upstream.close(r));
    }
  });
});
