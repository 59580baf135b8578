// The webhook delivery log on Account (docs/api.md "Webhooks") in a real Chromium: a failed attempt
// and its retry listed newest first with their answers, and Redeliver sending the event again.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture } from '../helpers/fixture.js';
import { hwid } from '../helpers/client.js';
import { hasChromium, launchChromium, newPage, screenshot, signIn, type Chromium } from './browser.js';

describe.skipIf(!hasChromium)('web dashboard: webhook deliveries', () => {
  let t: TestServer;
  let b: Chromium;
  let receiver: http.Server;
  const arrived: string[] = [];
  let failNext = 1;

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        arrived.push(Buffer.concat(chunks).toString('utf8'));
        if (failNext-- > 0) res.writeHead(503).end('busy, try later');
        else res.writeHead(200).end('thanks');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    b = await launchChromium();
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', ALLOW_PRIVATE_WEBHOOKS: '1', WEBHOOK_RETRY_MS: '10' });
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await t?.close();
    await new Promise((r) => receiver?.close(r));
  });

  it('lists each attempt with its answer and sends one again', async () => {
    const { port } = receiver.address() as AddressInfo;
    const f = await appFixture(t, { webhook: `http://127.0.0.1:${port}/hook` });
    const [key] = await f.keys(1);
    const c = f.client();
    await c.post('/api/client/license', { session: await f.session(c), license: key, hwid: hwid('web-delivery') });
    await t.server.app.domain.notify.webhooks.drain();
    expect(arrived).toHaveLength(2);

    const { page: p, errors } = await newPage(b);
    await signIn(p, t.base, OWNER.username, OWNER.password);
    await p.getByRole('link', { name: 'Account' }).click();
    const table = p.getByRole('table', { name: 'Webhook deliveries' });
    await table.waitFor();
    const rows = table.getByTestId('delivery-row');
    await expect.poll(() => rows.count()).toBe(2);
    expect(await rows.nth(0).textContent()).toContain('200');
    expect(await rows.nth(1).textContent()).toContain('503');
    await rows.nth(1).getByText('Response').click();
    await rows.nth(1).getByText('busy, try later').waitFor();
    await screenshot(p, 'webhook-deliveries');

    await rows
      .nth(1)
      .getByRole('button', { name: /^Redeliver client\.license/ })
      .click();
    await p.getByText('Sent again: the receiver answered 200').waitFor();
    await expect.poll(() => rows.count()).toBe(3);
    expect(arrived).toHaveLength(3);
    expect(arrived[2]).toBe(arrived[0]); // the same event, byte for byte
    // The sign-in page's first look at the session is a 401, which Chromium logs.
    expect(errors.filter((e) => !/^Failed to load resource: .* 401/.test(e))).toEqual([]);
  });
});
