// The shipped nginx site as the balancer of two workers with affinity (AFFINITY_ROUTE, AFFINITY_PORT):
// the map sends a call carrying X-Keywarden-Route to the worker it names, so no heartbeat is
// forwarded; calls without the header (or with a route nginx does not know) go round robin and,
// with two workers, about half of them are forwarded. A worker that stops is replaced by its backup.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, type Cluster } from '../helpers/cluster.js';
import type { ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';
import { requireToolchain } from '../helpers/toolchain.js';
import {
  freePort,
  nginxAvailable,
  opensslAvailable,
  originFetch,
  renderSite,
  selfSignedCert,
  startNginx,
  type Nginx,
} from './nginx-harness.js';

const hasRedis = await redisAvailable();
const ready =
  requireToolchain('nginx (Debian package nginx, /usr/sbin/nginx)', nginxAvailable()) &&
  requireToolchain('openssl (to make the test certificate)', opensslAvailable());
const SYS = 'nginx-affinity-01';
const HASH = 'feed0000'.repeat(4);
const CLIENTS = 12;

interface Live {
  c: ClientApi;
  session: string;
  token: string;
  index: number;
}

describe.skipIf(!ready || !hasRedis)('nginx routes on X-Keywarden-Route (deploy/nginx/keywarden.conf)', () => {
  let cluster: Cluster;
  let workers: ServerProcess[] = [];
  let nginx: Nginx;
  let tmp: string;
  let base: string;
  const realFetch = globalThis.fetch;

  beforeAll(async () => {
    const own = [await freePort(), await freePort()];
    cluster = await startCluster({
      workers: 2,
      name: 'Nginx affinity',
      keys: CLIENTS,
      envOf: (i) => ({ AFFINITY_ROUTE: `h${i}`, AFFINITY_PORT: String(own[i]) }),
    });
    workers = cluster.workers;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-tls-'));
    const cert = selfSignedCert(tmp);
    const tlsPort = await freePort();
    const site = renderSite({
      upstreamPort: workers[0]!.port,
      moreUpstreams: [workers[1]!.port],
      routes: workers.map((w, i) => ({ route: `h${i}-0`, address: own[i]!, backup: workers[1 - i]!.port })),
      tlsPort,
      httpPort: await freePort(),
      cert: cert.cert,
      key: cert.key,
    });
    nginx = await startNginx(site, tlsPort);
    base = `https://127.0.0.1:${tlsPort}`;
    globalThis.fetch = originFetch(base, cert.pem, '127.0.0.2', realFetch);
  }, 90_000);

  afterAll(async () => {
    globalThis.fetch = realFetch;
    await nginx?.stop();
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await cluster?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const forwarded = async () =>
    (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce((a, b) => a + b);

  /** Sends a call through nginx, echoing the route the client last got (as the SDKs do) when `echo`. */
  async function call(l: { c: ClientApi; route?: string }, p: string, body: Record<string, unknown>, echo: boolean) {
    if (echo && l.route) l.c.extraHeaders['x-keywarden-route'] = l.route;
    else delete l.c.extraHeaders['x-keywarden-route'];
    const r = await l.c.post(p, body);
    l.route = r.headers.get('x-keywarden-route') ?? l.route;
    return r;
  }

  async function beatAll(live: (Live & { route?: string })[], echo: boolean) {
    for (const l of live) {
      const r = await call(
        l,
        '/api/client/heartbeat',
        { session: l.session, token: l.token, system_id: SYS, beat_index: ++l.index, code_hash: HASH },
        echo,
      );
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      l.token = r.body.new_token as string;
    }
  }

  const live: (Live & { route?: string })[] = [];

  it('no beat is forwarded when the route is echoed; round robin forwards some', async () => {
    for (let i = 0; i < CLIENTS; i++) {
      const l = { c: new ClientApi(base), session: '', token: '', index: 0 } as Live & { route?: string };
      // nginx alternates per request, and each new client reads the published keys before init: one
      // more request on every other client lets the inits land on both workers.
      if (i % 2 === 1) await fetch(`${base}/healthz`);
      const init = await call(l, '/api/client/init', { api_key: cluster.app.api_key }, true);
      expect(init.status).toBe(200);
      l.session = init.body.session as string;
      expect(
        (await call(l, '/api/client/license', { session: l.session, license: cluster.keys[i], hwid: hwid(i) }, true))
          .status,
      ).toBe(200);
      const start = await call(l, '/api/client/heartbeat/start', { session: l.session, system_id: SYS }, true);
      expect(start.status).toBe(200);
      l.token = start.body.token as string;
      live.push(l);
    }
    expect(new Set(live.map((l) => l.route)).size, live.map((l) => l.route).join()).toBe(2);

    const before = await forwarded();
    await beatAll(live, true);
    await beatAll(live, true);
    expect(await forwarded()).toBe(before);

    // The same clients without the header: nginx's round robin, about half of them forwarded.
    await beatAll(live, false);
    await beatAll(live, false);
    expect(await forwarded()).toBeGreaterThan(before);
  }, 90_000);

  it('a worker that stops: its clients reach the backup, whose answers name their new owner', async () => {
    const gone = workers[0]!;
    await gone.stop('SIGTERM'); // graceful: its shards are handed over, its sessions stay durable
    workers = [workers[1]!];
    await beatAll(live, true);
    expect(new Set(live.map((l) => l.route))).toEqual(new Set(['h1-0']));
    await beatAll(live, true);
  }, 60_000);
});
