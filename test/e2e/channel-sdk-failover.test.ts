// The TypeScript SDK on the realtime channel against `keywarden serve` with WORKERS=2 (one port,
// the kernel spreads connections): the worker holding the SDK's channel is SIGKILLed; the SDK keeps
// beating over REST, reconnects to whichever worker answers, and its heartbeat continues without
// re-authentication, without a lost beat and without being killed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { spawnServer, freePort } from '../helpers/process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { Client, type Heartbeat } from '../../sdk/typescript/src/index.js';
import { scrape } from '../helpers/cluster.js';

const hasRedis = await redisAvailable();

describe.skipIf(!hasRedis)('SDK channel through a worker SIGKILL (WORKERS=2)', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-chfail-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('reconnects and continues the token chain without re-authentication', async () => {
    const db = await createTestDatabase();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const primary = await spawnServer({
      WORKERS: '2',
      PORT: String(port),
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kwcf${Date.now()}:`,
      DATA_DIR: dataDir,
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
    });
    let hb: Heartbeat | undefined;
    try {
      const workers = new Map<number, Record<string, number>>();
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const m = await scrape(base);
        if (m.keywarden_process_pid) workers.set(m.keywarden_process_pid, m);
        const all = [...workers.values()];
        if (
          workers.size === 2 &&
          all.every((x) => x.keywarden_cluster_members === 2) &&
          all.reduce((a, x) => a + x.keywarden_cluster_owned_shards!, 0) === 1024
        )
          break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(workers.size).toBe(2);

      const owner = await new Api(base).signIn(OWNER.username, OWNER.password);
      const app = (await owner.post('/apps', { name: 'Failover' })).body;
      await owner.patch(`/apps/${app.id}`, { heartbeat_interval: 5 });
      const [key] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body.map(
        (k: { key: string }) => k.key,
      );
      const published = ((await (await fetch(`${base}/api/client/keys`)).json()) as { keys: unknown[] }).keys;
      const client = Client.fromConfig({
        format: 1,
        base_url: base,
        api_key: app.api_key,
        version: '1.0',
        response_keys: published,
      } as never);
      await client.init();
      await client.activateLicense(key, 'failover-hwid-0001');
      const session = client.session;

      hb = await client.startHeartbeat('failover-system-01', 'abcdef0123456789', {
        intervalMs: 300,
        debuggerDetected: () => false,
      });
      const log: string[] = [];
      const counts: number[] = [];
      hb.on('beat', (b: { count: number }) => counts.push(b.count));
      hb.on('channel', (e: { state: string; close?: { code: number } }) =>
        log.push(`${e.state}${e.close ? ` ${e.close.code}` : ''}`),
      );
      for (const ev of ['degraded', 'recovered', 'killed', 'revoked']) hb.on(ev, () => log.push(ev));
      expect(hb.onChannel).toBe(true);
      const next = (event: string, match: (x: any) => boolean = () => true) =>
        new Promise<any>((resolve) => {
          const on = (x: unknown) => {
            if (!match(x)) return;
            hb!.off(event, on);
            resolve(x);
          };
          hb!.on(event, on);
        });
      await next('beat', (b) => b.count >= 2);

      // Which worker holds the channel?
      let holder: number | undefined;
      while (holder === undefined && Date.now() < deadline + 30_000) {
        const m = await scrape(base);
        if ((m.keywarden_channel_connections ?? 0) >= 1) holder = m.keywarden_process_pid;
      }
      expect(holder).toBeDefined();
      await next('beat'); // right after an answer: no beat is in flight when the worker dies
      process.kill(holder!, 'SIGKILL');
      const before = counts.length;

      await next('channel', (e) => e.state === 'open'); // reconnected (the survivor, or the restarted worker)
      await next('beat', () => counts.length >= before + 5);
      expect(client.session).toBe(session); // never re-authenticated
      expect(log).toContain('closed 1006');
      expect(log.filter((x) => ['degraded', 'recovered', 'killed', 'revoked'].includes(x))).toEqual([]);
      // One chain: every beat counted once, in order.
      expect(counts).toEqual(counts.map((_, i) => counts[0]! + i));
      await hb.stop();
    } finally {
      await hb?.stop();
      await primary.stop('SIGTERM');
      await db.drop();
    }
  }, 90_000);
});
