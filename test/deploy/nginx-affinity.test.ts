// The shipped nginx site as the balancer of two workers with affinity (AFFINITY_ROUTE, AFFINITY_PORT):
// the map sends a call carrying X-Keywarden-Route to the worker it names, so no heartbeat is
// forwarded; calls without the header (or with a route nginx does not know) go round robin and,
// with two workers, about half of them are forwarded. A worker that stops is replaced by its backup.
// Then two groups of workers on loopback as two hosts (routes a-0, a-1 and b-0, b-1): every worker of
// host a is SIGKILLed while route-echoing clients beat, and every client must beat again on host b.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, waitFor, type Cluster } from '../helpers/cluster.js';
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
      routes: workers.map((w, i) => ({ route: `h${i}-0`, address: own[i]!, host: `h${i}` })),
      hosts: { h0: [workers[0]!.port], h1: [workers[1]!.port] },
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

/**
 * What the SDKs do with the route (sdk/*): send back the last one an answer named; drop it after a
 * connection error, a 502/503/504 or a timeout, so the balancer picks any live worker next.
 */
interface Echoing extends Live {
  route?: string;
  /** Unsigned answers (a proxy's own 502) this client got, with the time its request left. */
  unsigned: { status: number; sentAt: number }[];
  /** When it first got an accepted beat from a worker of host b after the kill. */
  backAt?: number;
  /** Status and route of each answer since the kill (for the failure message). */
  seen: string[];
}

const FAILOVER_CLIENTS = 16;
/**
 * docs/multi-host.md: after a host dies, every client beats again on the other host within 10 s
 * (its shards are taken over once its membership stamp lapses, about 3 to 5 s; the rest is slack for
 * a loaded 2-core machine).
 */
const FAILOVER_BOUND_MS = 10_000;

describe.skipIf(!ready || !hasRedis)('nginx affinity when a whole host dies (deploy/nginx/keywarden.conf)', () => {
  let cluster: Cluster;
  let workers: ServerProcess[] = [];
  let nginx: Nginx;
  let tmp: string;
  let base: string;
  const realFetch = globalThis.fetch;
  const hostOf = (i: number) => (i < 2 ? 'a' : 'b');

  beforeAll(async () => {
    // Workers 0 and 1 are host a, 2 and 3 host b: each names itself <host>-<index on its host> and
    // listens for the balancer on AFFINITY_PORT + that index (the test picks each port free).
    const own = await Promise.all([0, 1, 2, 3].map(() => freePort()));
    cluster = await startCluster({
      workers: 4,
      name: 'Nginx failover',
      keys: FAILOVER_CLIENTS,
      envOf: (i) => ({
        AFFINITY_ROUTE: hostOf(i),
        KW_WORKER_INDEX: String(i % 2),
        AFFINITY_PORT: String(own[i]! - (i % 2)),
      }),
    });
    workers = cluster.workers;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-tls-'));
    const cert = selfSignedCert(tmp);
    const tlsPort = await freePort();
    // A host's "shared port" is the ports of its two workers here (on one machine, WORKERS=2 share one).
    const shared = (host: string) => workers.filter((_, i) => hostOf(i) === host).map((w) => w.port);
    nginx = await startNginx(
      renderSite({
        upstreamPort: workers[0]!.port,
        moreUpstreams: workers.slice(1).map((w) => w.port),
        routes: workers.map((_, i) => ({
          route: `${hostOf(i)}-${i % 2}`,
          address: own[i]!,
          host: hostOf(i),
        })),
        hosts: { a: shared('a'), b: shared('b') },
        tlsPort,
        httpPort: await freePort(),
        cert: cert.cert,
        key: cert.key,
      }),
      tlsPort,
    );
    base = `https://127.0.0.1:${tlsPort}`;
    globalThis.fetch = originFetch(base, cert.pem, '127.0.0.2', realFetch);
  }, 120_000);

  afterAll(async () => {
    globalThis.fetch = realFetch;
    await nginx?.stop();
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await cluster?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** One call as an SDK makes it; an unsigned answer (the test client throws on it) is noted, not thrown. */
  async function call(l: Echoing, p: string, body: Record<string, unknown>) {
    if (l.route) l.c.extraHeaders['x-keywarden-route'] = l.route;
    else delete l.c.extraHeaders['x-keywarden-route'];
    const sentAt = Date.now();
    try {
      const r = await l.c.post(p, body);
      if (r.status >= 502 && r.status <= 504) l.route = undefined;
      else l.route = r.headers.get('x-keywarden-route') ?? l.route;
      return r;
    } catch (err) {
      const m = /^unsigned response (\d+) /.exec((err as Error).message);
      if (!m) throw err;
      l.unsigned.push({ status: Number(m[1]), sentAt });
      l.route = undefined;
      return undefined;
    }
  }

  it('every client of host a beats again on host b within the bound, no session lost, no 502 after', async () => {
    const live: Echoing[] = [];
    for (let i = 0; i < FAILOVER_CLIENTS; i++) {
      const l: Echoing = { c: new ClientApi(base), session: '', token: '', index: 0, unsigned: [], seen: [] };
      const init = await call(l, '/api/client/init', { api_key: cluster.app.api_key });
      expect(init?.status).toBe(200);
      l.session = init!.body.session as string;
      const lic = await call(l, '/api/client/license', { session: l.session, license: cluster.keys[i], hwid: hwid(i) });
      expect(lic?.status).toBe(200);
      const start = await call(l, '/api/client/heartbeat/start', { session: l.session, system_id: SYS });
      expect(start?.status).toBe(200);
      l.token = start!.body.token as string;
      live.push(l);
    }
    const onA = live.filter((l) => l.route?.startsWith('a-'));
    expect(onA.length, live.map((l) => l.route).join()).toBeGreaterThanOrEqual(2);
    expect(live.every((l) => l.route !== undefined)).toBe(true);

    // Every client beats (a fresh beat after each accepted one, the same beat again after a refusal)
    // until told to stop. An answer is an accepted beat, a signed 503, or a proxy's unsigned error.
    let killedAt = Infinity;
    let running = true;
    const refusals: string[] = [];
    const beat = async (l: Echoing) => {
      const r = await call(l, '/api/client/heartbeat', {
        session: l.session,
        token: l.token,
        system_id: SYS,
        beat_index: l.index + 1,
        code_hash: HASH,
      });
      if (Date.now() > killedAt) l.seen.push(r ? `${r.status} ${l.route ?? '-'}` : 'unsigned');
      if (!r) return;
      if (r.status === 200) {
        l.token = r.body.new_token as string;
        l.index++;
        if (l.backAt === undefined && Date.now() > killedAt && l.route?.startsWith('b-')) l.backAt = Date.now();
      } else if (r.status !== 503) refusals.push(`${r.status} ${JSON.stringify(r.body)}`);
    };
    // The kill happens between two beats of every client: a call written to a process as it dies
    // ends in an unsigned 502 whatever the balancer does (nginx never sends a written POST twice), so
    // with none in flight every unsigned answer afterwards is the balancer's own doing.
    let gate: Promise<void> | undefined;
    let open = () => {};
    const atGate = new Set<Echoing>();
    let allAtGate = () => {};
    const loops = live.map(async (l) => {
      while (running) {
        if (gate) {
          atGate.add(l);
          if (atGate.size === live.length) allAtGate();
          await gate;
        }
        await beat(l);
        await new Promise((r) => setTimeout(r, 100)); // a client's pace, not a wait for an event
      }
    });
    const beaten = () => live.reduce((n, l) => n + l.index, 0);
    const before = beaten();
    await waitFor(async () => beaten() >= before + 2 * FAILOVER_CLIENTS);

    // Host a dies: both its workers at once, no handover, while the clients still hold a-0 and a-1.
    const idle = new Promise<void>((r) => (allAtGate = r));
    gate = new Promise<void>((r) => (open = r));
    await idle;
    expect(live.filter((l) => l.route?.startsWith('a-')).length).toBeGreaterThanOrEqual(2);
    killedAt = Date.now();
    await Promise.all([workers[0]!.stop('SIGKILL'), workers[1]!.stop('SIGKILL')]);
    gate = undefined;
    open();
    await waitFor(async () => live.every((l) => l.backAt !== undefined), FAILOVER_BOUND_MS + 5_000).catch(
      () => undefined,
    );
    running = false;
    await Promise.all(loops);

    const late = live.filter((l) => l.backAt === undefined || l.backAt - killedAt > FAILOVER_BOUND_MS);
    expect(
      late.map(
        (l) =>
          `${l.session.slice(0, 8)} ${l.backAt === undefined ? 'never' : `${l.backAt - killedAt} ms`}: ${l.seen.slice(0, 40).join(', ')}`,
      ),
    ).toEqual([]);
    expect(refusals).toEqual([]);
    // No unsigned answer at all: nginx passes every call for a-0 or a-1 on to a live backup on host
    // b, and never runs out of servers for a route.
    expect(live.flatMap((l) => l.unsigned)).toEqual([]);
    expect(nginx.errorLog()).not.toContain('no live upstreams');

    // No session lost: every client's next beat, with its latest token, is accepted on host b.
    for (const l of live) {
      const index = l.index;
      await beat(l);
      expect(l.index, `${l.session.slice(0, 8)}: ${refusals.join('; ')}`).toBe(index + 1);
      expect(l.route).toMatch(/^b-[01]$/);
    }
    console.log(
      `failover: every client back on host b ${Math.max(...live.map((l) => l.backAt! - killedAt))} ms after the kill`,
    );
  }, 120_000);
});
