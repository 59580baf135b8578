// Real worker processes in cluster mode for end-to-end tests: N servers sharing a fresh database,
// Redis and a DATA_DIR, an app (heartbeat_interval 5) with keys, and the waits until every worker
// sees the others and all 1,024 shards are owned.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Api } from './http.js';
import { OWNER, createTestDatabase } from './server.js';
import { spawnServer, type ServerProcess } from './process.js';
import { REDIS_URL } from './services.js';

export interface Cluster {
  workers: ServerProcess[];
  /** What each worker was started with: start more with `spawnServer(env)`. */
  env: Record<string, string>;
  owner: Api;
  app: { id: string; api_key: string };
  keys: string[];
  /** Drops the database and the data directory; the caller stops its workers first (tests replace some). */
  close(): Promise<void>;
}

export async function startCluster(o: {
  workers: number;
  name: string;
  keys: number;
  /** More settings for every worker. */
  env?: Record<string, string>;
  /** Settings of worker i alone (over `env`). */
  envOf?: (i: number) => Record<string, string>;
}): Promise<Cluster> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-cluster-'));
  const db = await createTestDatabase();
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL,
    REDIS_PREFIX: `kwc${Date.now()}${Math.random().toString(36).slice(2, 6)}:`,
    DATA_DIR: dataDir,
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
    TRUSTED_PROXIES: '127.0.0.1',
    ...o.env,
  };
  const workers = await Promise.all(
    Array.from({ length: o.workers }, (_, i) => spawnServer({ ...env, ...o.envOf?.(i) })),
  );
  const owner = await new Api(workers[0]!.base).signIn(OWNER.username, OWNER.password);
  const app = (await owner.post('/apps', { name: o.name })).body as { id: string; api_key: string };
  await owner.patch(`/apps/${app.id}`, { heartbeat_interval: 5 });
  const keys = (await owner.post(`/apps/${app.id}/licenses`, { amount: o.keys, duration: 1 })).body.map(
    (k: { key: string }) => k.key,
  );
  await untilFormed(workers);
  return {
    workers,
    env,
    owner,
    app,
    keys,
    close: async () => {
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Every worker sees all of them as members, and the shards are all owned. */
export async function untilFormed(workers: ServerProcess[]): Promise<void> {
  const all = (name: string) => Promise.all(workers.map((w) => metric(w, name)));
  await waitFor(async () => (await all('keywarden_cluster_members')).every((n) => n === workers.length));
  await waitFor(async () => (await all('keywarden_cluster_owned_shards')).reduce((a, b) => a + b, 0) === 1024);
}

/** One gauge or counter of a worker's /metrics (NaN when absent). */
export async function metric(w: ServerProcess, name: string): Promise<number> {
  const text = await (await fetch(`${w.base}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

/**
 * The unlabelled integer metrics of whichever worker answers: a new connection each time, so with
 * WORKERS=N on one port the kernel may hand it to any of them.
 */
export async function scrape(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^(keywarden_[a-z_]+) (\d+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** Polls a condition over other processes' state (nothing to subscribe to) every 100 ms. */
export async function waitFor(cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
