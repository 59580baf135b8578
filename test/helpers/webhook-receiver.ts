// A local webhook receiver for the integration tests (geo, webhooks, discord-webhooks): an HTTP
// server on 127.0.0.1 port 0 that records every delivery and lets a test await the one it expects.
// Start the test server with ALLOW_PRIVATE_WEBHOOKS=1 so it may deliver to 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One delivery as it arrived. */
export interface WebhookDelivery {
  path: string;
  headers: http.IncomingHttpHeaders;
  contentType: string;
  raw: Buffer;
  /** raw as UTF-8 text */
  body: string;
  signature: string | undefined;
}

export interface WebhookReceiver<H> {
  /** http://127.0.0.1:<port> */
  url: string;
  /** 127.0.0.1:<port> */
  host: string;
  /** Every delivery so far, as the test sees it (`toHit`), in arrival order. */
  hits: H[];
  /** The first delivery (already arrived or still to come) that matches. */
  nextHit(match: (h: H) => boolean): Promise<H>;
  /** Per path: how many times to answer 500 (the delivery is not recorded) before answering 204. */
  failures: Map<string, number>;
  close(): Promise<void>;
}

/** `toHit` turns a delivery into what the test matches on (default: the delivery itself). */
export async function startWebhookReceiver<H = WebhookDelivery>(
  toHit: (d: WebhookDelivery) => H = (d) => d as H,
): Promise<WebhookReceiver<H>> {
  const hits: H[] = [];
  const waiters: { match: (h: H) => boolean; resolve: (h: H) => void }[] = [];
  const failures = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const left = failures.get(req.url!) ?? 0;
      if (left > 0) {
        failures.set(req.url!, left - 1);
        res.writeHead(500).end();
        return;
      }
      const raw = Buffer.concat(chunks);
      const hit = toHit({
        path: req.url!,
        headers: req.headers,
        contentType: String(req.headers['content-type']),
        raw,
        body: raw.toString('utf8'),
        signature: req.headers['x-keywarden-signature'] as string | undefined,
      });
      hits.push(hit);
      for (const w of waiters.splice(0)) {
        if (w.match(hit)) w.resolve(hit);
        else waiters.push(w);
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${host}`,
    host,
    hits,
    failures,
    nextHit(match) {
      const seen = hits.find(match);
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
