// `npx tsx bench/affinity.ts [--clients=40] [--beats=10] [--root=DIR]`
// Share of heartbeat operations forwarded to another worker (session affinity: `init` draws the
// session on a shard of the worker that took it). Starts `keywarden serve` with WORKERS=2 (Redis at
// REDIS_URL, one port shared by the kernel), and runs clients the way the SDKs do: each on its own
// keep-alive connection (so the kernel puts all of one client's calls on one worker), init,
// license, heartbeat/start, then beats. Reads keywarden_cluster_forwarded_total and _local_total of
// both workers around the heartbeat calls (license operations route by the key, not the session, so
// they are left out). --root runs another checkout for a before/after comparison. Prints a JSON
// line.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, freshDatabase } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const CLIENTS = Number(arg('clients', '40'));
const BEATS = Number(arg('beats', '10'));
const ROOT = path.resolve(arg('root', path.resolve(here, '..')));
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const OWNER = { username: 'benchowner', password: 'bench-pass-1' };
const SYS = 'affinity-system-1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function request(
  agent: http.Agent | false,
  url: string,
  method: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent,
        headers: {
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function json(agent: http.Agent | false, url: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await request(agent, url, 'POST', body, headers);
  if (r.status !== 200) throw new Error(`${url} -> ${r.status} ${r.text}`);
  return JSON.parse(r.text) as any;
}

/** Both workers' counters: scrape on new connections until each pid answered. */
async function workerMetrics(base: string): Promise<Map<number, Record<string, number>>> {
  const seen = new Map<number, Record<string, number>>();
  for (let i = 0; i < 400 && seen.size < 2; i++) {
    const r = await request(false, `${base}/metrics`, 'GET', undefined, { connection: 'close' });
    const m: Record<string, number> = {};
    for (const x of r.text.matchAll(/^([a-z_]+) ([0-9.e+]+)$/gm)) m[x[1]!] = Number(x[2]);
    seen.set(m.keywarden_process_pid!, m);
  }
  return seen;
}

async function main(): Promise<void> {
  const db = await freshDatabase(ADMIN_URL, `kwbench_aff_${process.pid}`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-aff-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: `kwaff${Date.now()}:`,
      WORKERS: '2',
      LOG_LEVEL: 'warn',
      TRUSTED_PROXIES: '127.0.0.1',
      GEOIP_DB: 'off',
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    // Wait for the split to settle: both members seen by both, the 1024 shards held, and the same
    // counts a second later (right after start one worker holds them all and hands half over).
    let last = '';
    for (let i = 0; ; i++) {
      const ms = await workerMetrics(base).catch(() => new Map<number, Record<string, number>>());
      const all = [...ms.values()];
      const owned = all.map((m) => m.keywarden_cluster_owned_shards ?? 0);
      const split =
        ms.size === 2 &&
        all.every((m) => m.keywarden_cluster_members === 2) &&
        owned.every((n) => n > 256) &&
        owned[0]! + owned[1]! === 1024;
      const now = owned.join('/');
      if (split && now === last) break;
      last = split ? now : '';
      if (i > 120) throw new Error('the two workers did not split the shards');
      await sleep(1_000);
    }
    const { token } = await json(false, `${base}/api/auth/login`, OWNER);
    const auth = { authorization: `Bearer ${token}` };
    const app = await json(false, `${base}/api/apps`, { name: 'Affinity bench' }, auth);
    const keys = (await json(
      false,
      `${base}/api/apps/${app.id}/licenses`,
      { amount: CLIENTS, unit: 'lifetime' },
      auth,
    )) as {
      key: string;
    }[];
    // Each client: one keep-alive connection for all its calls, as the SDKs do.
    const clients = await Promise.all(
      keys.map(async ({ key }, i) => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const h = { 'x-forwarded-for': `100.70.${i >> 8}.${i & 255}` };
        const session = (await json(agent, `${base}/api/client/init`, { api_key: app.api_key }, h)).session as string;
        await json(agent, `${base}/api/client/license`, { session, license: key, hwid: `affinity-device-${i}` }, h);
        return { agent, h, session };
      }),
    );
    const before = await workerMetrics(base);
    await Promise.all(
      clients.map(async (c) => {
        let t = (await json(c.agent, `${base}/api/client/heartbeat/start`, { session: c.session, system_id: SYS }, c.h))
          .token as string;
        for (let b = 1; b <= BEATS; b++) {
          const r = await json(
            c.agent,
            `${base}/api/client/heartbeat`,
            { session: c.session, token: t, system_id: SYS, beat_index: b, code_hash: 'ab'.repeat(16) },
            c.h,
          );
          t = r.new_token;
        }
        c.agent.destroy();
      }),
    );
    const after = await workerMetrics(base);
    const sum = (ms: Map<number, Record<string, number>>, k: string) =>
      [...ms.values()].reduce((a, m) => a + (m[k] ?? 0), 0);
    const forwarded =
      sum(after, 'keywarden_cluster_forwarded_total') - sum(before, 'keywarden_cluster_forwarded_total');
    const local = sum(after, 'keywarden_cluster_local_total') - sum(before, 'keywarden_cluster_local_total');
    console.log(
      JSON.stringify({
        root: ROOT,
        clients: CLIENTS,
        beats: BEATS,
        heartbeat_ops: forwarded + local,
        forwarded,
        local,
        forwarded_share: Number((forwarded / Math.max(1, forwarded + local)).toFixed(3)),
      }),
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    fs.rmSync(dataDir, { recursive: true, force: true });
    await db.drop();
  }
}

await main();
