// `keywarden serve` with WORKERS=2: two worker processes share one port, see each other, split
// the shards, and all stop in order on SIGTERM to the primary.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/server.js';
import { spawnServer, freePort } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { scrape } from '../helpers/cluster.js';

const hasRedis = await redisAvailable();

describe.skipIf(!hasRedis)('WORKERS=2', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-workers-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('runs two workers on one port that split the shards and stop with the primary', async () => {
    const db = await createTestDatabase();
    const port = await freePort();
    const primary = await spawnServer({
      WORKERS: '2',
      PORT: String(port),
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kww${Date.now()}:`,
      DATA_DIR: dataDir,
    });
    try {
      const seen = new Map<number, Record<string, number>>();
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const m = await scrape(`http://127.0.0.1:${port}`);
        if (m.keywarden_process_pid) seen.set(m.keywarden_process_pid, m);
        const all = [...seen.values()];
        if (
          seen.size === 2 &&
          all.every((x) => x.keywarden_cluster_members === 2) &&
          all.reduce((a, x) => a + x.keywarden_cluster_owned_shards!, 0) === 1024
        )
          break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(seen.size).toBe(2);
      expect([...seen.values()].reduce((a, x) => a + x.keywarden_cluster_owned_shards!, 0)).toBe(1024);
    } finally {
      expect(await primary.stop('SIGTERM')).toBe(0);
      await db.drop();
    }
    expect(primary.output.join('\n')).toContain('cluster.stopped');
  }, 60_000);

  it('workers whose primary was SIGKILLed leave instead of living on as orphans', async () => {
    const db = await createTestDatabase();
    const port = await freePort();
    const env = {
      WORKERS: '2',
      PORT: String(port),
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kwwo${Date.now()}:`,
    };
    const primary = await spawnServer({ ...env, DATA_DIR: dataDir });
    const pids = new Set<number>();
    try {
      for (const until = Date.now() + 30_000; pids.size < 2 && Date.now() < until;) {
        const m = await scrape(`http://127.0.0.1:${port}`);
        if (m.keywarden_process_pid) pids.add(m.keywarden_process_pid);
      }
      expect(pids.size).toBe(2);
      await primary.stop('SIGKILL');
      const alive = () =>
        [...pids].filter((pid) => {
          try {
            process.kill(pid, 0);
            return true;
          } catch {
            return false;
          }
        });
      // A liveness bound: each worker shuts down gracefully (its drain is bounded by SHUTDOWN_TIMEOUT_MS).
      for (const until = Date.now() + 30_000; alive().length > 0 && Date.now() < until;)
        await new Promise((r) => setTimeout(r, 100));
      expect(alive()).toEqual([]);
    } finally {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await db.drop();
    }
  }, 90_000);
});
