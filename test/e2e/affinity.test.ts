// Balancer affinity through any proxy: every client answer names the worker that owns the session's
// shard (X-Keywarden-Route: <AFFINITY_ROUTE>-<worker index>), each worker also listens on a port of
// its own (AFFINITY_PORT + index), and a balancer that sends each call to the worker the last answer
// named (what the shipped nginx and Caddy configurations do with the header the SDKs echo) gets
// every heartbeat served where its session lives: nothing forwarded. Two real worker processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, type Cluster } from '../helpers/cluster.js';
import { freePort, type ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();
const SYS = 'affinity-system-01';
const HASH = 'a11ce000'.repeat(4);
const CLIENTS = 16;

describe.skipIf(!hasRedis)(
  'X-Keywarden-Route: answers name the owner; a balancer routing on it forwards nothing',
  () => {
    let cluster: Cluster;
    let workers: ServerProcess[] = [];
    /** route -> the base URL of that worker's own port */
    const own = new Map<string, string>();

    beforeAll(async () => {
      const ports = [await freePort(), await freePort()];
      cluster = await startCluster({
        workers: 2,
        name: 'Affinity',
        keys: CLIENTS + 2,
        envOf: (i) => ({ AFFINITY_ROUTE: `w${i}`, AFFINITY_PORT: String(ports[i]) }),
      });
      workers = cluster.workers;
      ports.forEach((p, i) => own.set(`w${i}-0`, `http://127.0.0.1:${p}`));
    }, 90_000);

    afterAll(async () => {
      await Promise.all(workers.map((w) => w.stop('SIGTERM')));
      await cluster?.close();
    });

    const forwarded = async () =>
      (await Promise.all(workers.map((w) => metric(w, 'keywarden_cluster_forwarded_total')))).reduce((a, b) => a + b);

    /** One client behind a routing balancer: init anywhere, then every call to the worker last named. */
    class RoutedClient {
      route: string | undefined;
      session = '';
      token = '';
      index = 0;
      constructor(private readonly initVia: string) {}

      async post(path: string, body: Record<string, unknown>) {
        const c = new ClientApi(this.route ? own.get(this.route)! : this.initVia);
        if (this.route) c.extraHeaders['x-keywarden-route'] = this.route;
        const r = await c.post(path, body);
        const named = r.headers.get('x-keywarden-route');
        if (named) this.route = named;
        return { ...r, named };
      }
    }

    it('names the owner on init, on every call, and on a call another worker forwarded', async () => {
      const clients = Array.from({ length: CLIENTS }, (_, i) => new RoutedClient(workers[i % 2]!.base));
      for (const [i, c] of clients.entries()) {
        const init = await c.post('/api/client/init', { api_key: cluster.app.api_key });
        expect(init.status).toBe(200);
        expect(init.named).toMatch(/^w[01]-0$/);
        c.session = init.body.session as string;
        const lic = await c.post('/api/client/license', {
          session: c.session,
          license: cluster.keys[i],
          hwid: hwid(i),
        });
        expect(lic.status).toBe(200);
        const start = await c.post('/api/client/heartbeat/start', { session: c.session, system_id: SYS });
        expect(start.status).toBe(200);
        c.token = start.body.token as string;
      }
      // Both workers own sessions (init lands round robin here, and each draws on its own shards).
      expect(new Set(clients.map((c) => c.route)).size).toBe(2);

      const before = await forwarded();
      for (let round = 0; round < 3; round++) {
        for (const c of clients) {
          const r = await c.post('/api/client/heartbeat', {
            session: c.session,
            token: c.token,
            system_id: SYS,
            beat_index: ++c.index,
            code_hash: HASH,
          });
          expect(r.status, JSON.stringify(r.body)).toBe(200);
          c.token = r.body.new_token as string;
        }
      }
      expect(await forwarded()).toBe(before); // every beat was served by its session's owner
      for (const w of workers) {
        const echoed = await metric(w, 'keywarden_affinity_echoed_total');
        expect(echoed).toBeGreaterThan(0);
        expect(await metric(w, 'keywarden_affinity_reached_total')).toBe(echoed);
      }

      // A call that reaches the other worker (a balancer without the map) is forwarded, and its
      // answer names the owner, so the next call goes there.
      const c = clients[0]!;
      const owner = c.route!;
      const other = owner === 'w0-0' ? 'w1-0' : 'w0-0';
      const stray = new ClientApi(own.get(other)!);
      const r = await stray.post('/api/client/heartbeat', {
        session: c.session,
        token: c.token,
        system_id: SYS,
        beat_index: ++c.index,
        code_hash: HASH,
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-keywarden-route')).toBe(owner);
      expect(await forwarded()).toBe(before + 1);
    }, 90_000);

    it('an unknown session gets no route; the header a client sends cannot route anything by itself', async () => {
      const c = new ClientApi(workers[0]!.base);
      c.extraHeaders['x-keywarden-route'] = 'w1-0';
      const r = await c.post('/api/client/heartbeat', {
        session: 'S' + 'x'.repeat(40),
        token: 'TT' + '0'.repeat(32),
        system_id: SYS,
        beat_index: 1,
        code_hash: HASH,
      });
      expect(r.status).toBe(401);
      expect(r.headers.get('x-keywarden-route')).toBeNull();
    });
  },
);
