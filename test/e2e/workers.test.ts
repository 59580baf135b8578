// `keywarden serve` with WORKERS=2: two worker processes share one port, see each other, split
// the shards, and all stop in order on SIGTERM to the primary. A worker that refuses to start for a
// configuration reason stops the group with one fatal line, instead of being started again.
import { randomBytes } from 'node:crypto';
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

  it('a worker refusing its keys stops the group: one fatal line with the reason, exit 78, no restart', async () => {
    const db = await createTestDatabase();
    const keys = () => ({
      RESPONSE_SIGNING_KEY: randomBytes(32).toString('base64'),
      LICENSE_HASH_KEY: randomBytes(32).toString('base64'),
      TWO_FACTOR_KEY: randomBytes(32).toString('base64'),
    });
    try {
      // The deployment's keys are recorded by the first host to start...
      const first = await spawnServer({ DATABASE_URL: db.url, DATA_DIR: dataDir, ...keys() });
      await first.stop('SIGKILL'); // recorded before it listened
      // ...and a group of two workers with other keys refuses to start.
      const group = spawnServer({
        WORKERS: '2',
        PORT: String(await freePort()),
        DATABASE_URL: db.url,
        REDIS_URL,
        REDIS_PREFIX: `kwwr${Date.now()}:`,
        DATA_DIR: dataDir,
        ...keys(),
      });
      const said = await group.then(
        () => 'listening',
        (e: unknown) => String(e),
      );
      expect(said).toContain('server exited (78) before listening');
      expect(group.child.exitCode).toBe(78);
      const lines = said.split('\n');
      const fatal = lines.filter((l) => l.includes('cluster.worker_refused'));
      expect(fatal, said).toHaveLength(1);
      expect(JSON.parse(fatal[0]!)).toMatchObject({ level: 60, code: 78 });
      expect(fatal[0]).toContain('RESPONSE_SIGNING_KEY');
      expect(fatal[0]).toContain('keywarden secrets export');
      expect(said).not.toContain('cluster.worker_died');
      // The reason is said once, by the supervisor, not again by every worker.
      expect(
        lines.filter((l) => l.includes('differ from the ones this database')),
        said,
      ).toHaveLength(1);
    } finally {
      await db.drop();
    }
  }, 90_000);

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
