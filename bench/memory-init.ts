// `npx tsx bench/memory-init.ts [--n=100000] [--pool=1000|distinct] [--enc] [--root=DIR]`
// Memory a worker keeps per unactivated `init` (target: at most 100 B). Starts one `keywarden serve` (no Redis,
// node --expose-gc, TRUSTED_PROXIES=127.0.0.1) on a fresh database, opens an app, sends N inits
// whose X-Forwarded-For comes from a pool of addresses (--pool=1000) or is new every time
// (--pool=distinct), and reads the worker's heap, external memory and RSS after forced
// collections (SIGUSR2 -> gc(), see src/cli.ts) before and after. --enc sends an enc_key with
// every init. --root runs another checkout (e.g. `git archive HEAD | tar -x -C /tmp/before`,
// with node_modules linked) for a before/after comparison. Prints a JSON line and a table.
//
// The per-address limit is 30 inits a minute: from a pool of 1,000 addresses at most 30,000 of
// the N inits in a minute succeed, the rest are answered 429 (they cost nothing to keep; the
// divisor of "per session" is the successful ones).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, freshDatabase } from './lib.js';
import { withMallocDefaults } from '../src/supervisor.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const N = Number(arg('n', '100000'));
const POOL = arg('pool', 'distinct');
const ENC = process.argv.includes('--enc');
const ROOT = path.resolve(arg('root', path.resolve(here, '..')));
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const CONCURRENCY = 48;
const OWNER = { username: 'benchowner', password: 'bench-pass-1' };

async function metrics(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^([a-z_]+) ([0-9.e+]+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Two forced full collections a moment apart, then a sample. */
async function settled(child: ChildProcess, base: string): Promise<Record<string, number>> {
  for (let i = 0; i < 2; i++) {
    child.kill('SIGUSR2');
    await sleep(700);
  }
  return metrics(base);
}

function address(i: number): string {
  if (POOL === 'distinct') return `11.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  const j = i % Number(POOL);
  return `100.64.${(j >> 8) & 255}.${j & 255}`;
}

// node:http with a keep-alive agent: about twice the rate of fetch() here, and the server shares the cores.
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
function post(base: string, p: string, body: unknown, headers: Record<string, string> = {}) {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise<{ status: number; body: any }>((resolve, reject) => {
    const req = http.request(
      base + p,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': String(payload.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function main(): Promise<void> {
  const db = await freshDatabase(ADMIN_URL, `kwbench_mem_${process.pid}`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-mem-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'serve'], {
    cwd: ROOT,
    // As `npm start` runs it (glibc malloc settings included).
    env: withMallocDefaults({
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: db.url,
      REDIS_URL: '',
      LOG_LEVEL: 'warn',
      TRUSTED_PROXIES: '127.0.0.1',
      GEOIP_DB: 'off',
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
    }),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${base}/readyz`)).status === 200) break;
      } catch {
        // not listening yet
      }
      if (i > 600) throw new Error('server did not start');
      await sleep(100);
    }
    const { token } = (await post(base, '/api/auth/login', OWNER)).body;
    const app = (await post(base, '/api/apps', { name: 'Memory bench' }, { authorization: `Bearer ${token}` })).body;
    const body = (i: number) => (ENC ? { api_key: app.api_key, enc_key: `bench-enc-${i}` } : { api_key: app.api_key });
    const run = async (count: number, from: (i: number) => string) => {
      const statuses = new Map<number, number>();
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < count) {
            const i = next++;
            const r = await post(base, '/api/client/init', body(i), { 'x-forwarded-for': from(i) });
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          }
        }),
      );
      return statuses;
    };
    // Every init on a known app writes an audit line; lines queue in the worker until a batched
    // INSERT takes them. Sample only once the queue is empty (all lines are in the table), or the
    // backlog would be counted as memory per session.
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    const audited = async (n: number) => {
      for (let i = 0; i < 1200; i++) {
        const r = await sql.query(`select count(*)::int as n from audit_log where action = 'client.init'`);
        if (r.rows[0].n >= n) return;
        await sleep(100);
      }
      throw new Error('audit lines did not arrive');
    };
    // Warm-up (JIT, pools, the audit writer) from addresses outside the measured ones.
    const warm = await run(3_000, (i) => `10.250.${(i >> 8) & 255}.${i & 255}`);
    await audited(warm.get(200) ?? 0);
    const before = await settled(child, base);
    const t0 = performance.now();
    const statuses = await run(N, address);
    const seconds = (performance.now() - t0) / 1000;
    await audited((warm.get(200) ?? 0) + (statuses.get(200) ?? 0));
    await sql.end();
    const after = await settled(child, base);
    const d = (k: string) => (after[`keywarden_${k}`] ?? 0) - (before[`keywarden_${k}`] ?? 0);
    const sessions = statuses.get(200) ?? 0;
    const heap = d('nodejs_heap_size_used_bytes');
    const external = d('nodejs_external_memory_bytes');
    const rss = d('process_resident_memory_bytes');
    const result = {
      root: ROOT,
      n: N,
      pool: POOL,
      enc: ENC,
      seconds: Number(seconds.toFixed(1)),
      statuses: Object.fromEntries(statuses),
      sessions,
      heap_bytes: heap,
      external_bytes: external,
      rss_bytes: rss,
      heap_per_session: Math.round(heap / Math.max(1, sessions)),
      heap_plus_external_per_session: Math.round((heap + external) / Math.max(1, sessions)),
      rss_per_session: Math.round(rss / Math.max(1, sessions)),
      heap_plus_external_per_request: Math.round((heap + external) / N),
    };
    console.log(JSON.stringify(result));
    console.log(
      `| ${POOL === 'distinct' ? 'all distinct addresses' : `pool of ${POOL} addresses`}${ENC ? ', enc_key' : ''} ` +
        `| ${N.toLocaleString('en-US')} | ${sessions.toLocaleString('en-US')} | ${result.heap_per_session} ` +
        `| ${result.heap_plus_external_per_session} | ${result.rss_per_session} |`,
    );
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    fs.rmSync(dataDir, { recursive: true, force: true });
    await db.drop();
  }
}

await main();
