// `npm run bench [-- --quick]`: measures Keywarden the way fleets load it and writes
// bench/results/<timestamp>.{json,md,svg}. Load comes from wrk (a native generator, with Lua);
// Node only prepares sessions. Every throughput is reported as a ratio to workload (a), the
// bare uWebSockets.js ceiling, measured in the same run. Nothing here asserts a target.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded-postgres.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const quick = process.argv.includes('--quick');
const DURATION_S = quick ? 3 : 15;
const CONNECTIONS = 16; // one session chain per wrk thread (see lua/heartbeat.lua)
const memoryOnly = process.argv.find((a) => a.startsWith('--memory='));
const MEMORY_POINTS = memoryOnly ? [Number(memoryOnly.split('=')[1])] : quick ? [10_000] : [10_000, 100_000, 250_000];
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const OWNER = { username: 'benchowner', password: 'bench-pass-1' };

interface WrkResult { requests: number; duration_us: number; non2xx: number; socket_errors: number; p50_us: number; p99_us: number; p999_us: number }
interface Row { workload: string; rps?: number; ratio?: number; note?: string; p50_ms?: number; p99_ms?: number; p999_ms?: number; value?: number; unit?: string }

const rows: Row[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
const t0 = Date.now();

function progress(msg: string): void {
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(3)}s] ${msg}\n`);
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-logs-'));
function start(args: string[], env: Record<string, string>, nodeFlags: string[] = []): ChildProcess {
  const log = fs.openSync(path.join(logDir, `${args.join('_').replace(/\W+/g, '_')}-${env.PORT ?? 'x'}.log`), 'a');
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', log, log] });
  cleanups.push(() => new Promise<void>((r) => {
    if (child.exitCode !== null || child.signalCode !== null) return r();
    child.once('exit', () => r());
    child.kill('SIGTERM');
  }));
  return child;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function wrk(script: string, base: string, env: Record<string, string>, threads = CONNECTIONS, duration = DURATION_S): WrkResult {
  const r = spawnSync('wrk', [`-t${threads}`, `-c${threads}`, `-d${duration}s`, '--timeout', '5s', '-s', path.join(here, 'lua', script), base], {
    env: { ...process.env, KW_LUA_DIR: path.join(here, 'lua'), ...env }, encoding: 'utf8',
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('KWRESULT '));
  if (!line) throw new Error(`wrk gave no result: ${r.stdout}\n${r.stderr}`);
  return JSON.parse(line.slice('KWRESULT '.length)) as WrkResult;
}

const rps = (w: WrkResult) => w.requests / (w.duration_us / 1e6);

// ---- a small HTTP client for preparing sessions (not the measured load) -------------------

let ipSeq = 0;
async function post(base: string, p: string, body: unknown, token?: string, retries = 2): Promise<any> {
  const n = ++ipSeq;
  let res: Response;
  try {
    res = await fetch(base + p, {
    method: 'POST', body: JSON.stringify(body),
    headers: {
      'content-type': 'application/json', 'x-forwarded-for': `172.${16 + ((n >> 16) & 15)}.${(n >> 8) & 255}.${n & 255}`,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
  });
  } catch (err) {
    // A pooled keep-alive connection the server had just closed: send again on a new one.
    if (retries > 0) return post(base, p, body, token, retries - 1);
    throw err;
  }
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${p} -> ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function patch(base: string, p: string, body: unknown, token: string): Promise<void> {
  const res = await fetch(base + p, { method: 'PATCH', body: JSON.stringify(body), headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`${p} -> ${res.status} ${await res.text()}`);
}

interface Fixture { apiKey: string; license: string; username: string; password: string }

async function fixture(base: string, settings: Record<string, unknown> = {}): Promise<Fixture> {
  const { token } = await post(base, '/api/auth/login', OWNER);
  const app = await post(base, '/api/apps', { name: `Bench ${Date.now()}` }, token);
  if (Object.keys(settings).length > 0) await patch(base, `/api/apps/${app.id}`, settings, token);
  const [k1, k2] = await post(base, `/api/apps/${app.id}/licenses`, { amount: 2, unit: 'lifetime' }, token);
  const s = (await post(base, '/api/client/init', { api_key: app.api_key })).session;
  await post(base, '/api/client/register', { session: s, username: 'benchuser', password: 'bench-user-1', license: k2.key, hwid: 'bench-device-0001' });
  return { apiKey: app.api_key, license: k1.key, username: 'benchuser', password: 'bench-user-1' };
}

/** n activated sessions with a started heartbeat each: "session token" lines. */
async function heartbeatSessions(base: string, f: Fixture, n: number, concurrency = 32): Promise<string[]> {
  const out: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      next++;
      const s = (await post(base, '/api/client/init', { api_key: f.apiKey })).session;
      await post(base, '/api/client/license', { session: s, license: f.license, hwid: 'bench-device-0001' });
      const hb = await post(base, '/api/client/heartbeat/start', { session: s, system_id: 'bench-system-01' });
      out.push(`${s} ${hb.token}`);
      if (n >= 10_000 && out.length % 10_000 === 0) progress(`  ${out.length} / ${n} sessions`);
    }
  }));
  return out;
}

function writeLines(lines: string[]): string {
  const f = path.join(os.tmpdir(), `kw-bench-${process.pid}-${Math.random().toString(36).slice(2)}.txt`);
  fs.writeFileSync(f, lines.join('\n') + '\n');
  cleanups.push(() => fs.rmSync(f, { force: true }));
  return f;
}

async function metrics(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^([a-z_]+) ([0-9.e+]+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** Per-worker metrics behind one shared port: scrape with fresh connections until every pid answered. */
async function workerMetrics(base: string, workers: number): Promise<Record<string, number>[]> {
  const seen = new Map<number, Record<string, number>>();
  for (let i = 0; i < 400 && seen.size < workers; i++) {
    const m = await metrics(base);
    seen.set(m.keywarden_process_pid!, m);
  }
  return [...seen.values()];
}

// ---- the run ------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (spawnSync('wrk', ['--version']).error) {
    console.error('wrk is needed (a native load generator): apt-get install wrk');
    process.exit(2);
  }
  progress(`server logs in ${logDir}`);
  progress(`${quick ? 'quick' : 'full'} run on ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let adminUrl = process.env.DATABASE_URL;
  let embedded: EmbeddedPostgres | undefined;
  if (!adminUrl) {
    embedded = await startEmbeddedPostgres(path.join(dataDir, 'pgdata'), pino({ level: 'warn' }));
    const t = embedded.target;
    adminUrl = `postgresql://${t.user}:${encodeURIComponent(t.password)}@localhost:${t.port}/postgres?host=${encodeURIComponent(t.host)}`;
  }
  const dbs: string[] = [];
  const freshDb = async (): Promise<string> => {
    const name = `kwbench_${dbs.length}_${process.pid}`;
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(`drop database if exists "${name}" with (force)`);
    await c.query(`create database "${name}"`);
    await c.end();
    dbs.push(name);
    const u = new URL(adminUrl!);
    u.pathname = `/${name}`;
    return u.toString();
  };

  const serve = async (env: Record<string, string>, nodeFlags: string[] = []) => {
    const port = await freePort();
    const child = start(['src/cli.ts', 'serve'], {
      PORT: String(port), HOST: '127.0.0.1', DATA_DIR: path.join(dataDir, `kw-${port}`), LOG_LEVEL: 'warn', TRUSTED_PROXIES: '127.0.0.1',
      OWNER_USERNAME: OWNER.username, OWNER_PASSWORD: OWNER.password, REDIS_URL: '', ...env,
    }, nodeFlags);
    const base = `http://127.0.0.1:${port}`;
    await until('keywarden', async () => (await fetch(`${base}/readyz`)).status === 200);
    return { base, child };
  };

  try {
    if (memoryOnly) return await memoryWorkload(serve, freshDb);
    // (a) the ceiling
    progress('(a) ceiling: bare uWebSockets.js + JSON + Ed25519');
    const cport = await freePort();
    start(['bench/ceiling-server.ts'], { PORT: String(cport) });
    const cbase = `http://127.0.0.1:${cport}`;
    await until('ceiling', async () => (await fetch(`${cbase}/api/client/heartbeat`, {
      method: 'POST', body: JSON.stringify({ session: 's', token: 't', beat_index: 1 }), signal: AbortSignal.timeout(1000),
    })).status === 200);
    const fakeSessions = writeLines(Array.from({ length: CONNECTIONS }, (_, i) => `S${String(i).padStart(42, '0')} TT${'0'.repeat(32)}`));
    const ceiling = rps(wrk('heartbeat.lua', cbase, { KW_SESSIONS: fakeSessions }));
    rows.push({ workload: '(a) ceiling: bare uWS handler, parse + sign', rps: ceiling, ratio: 1 });

    // (b) signed heartbeats, one worker
    progress('(b) signed heartbeats through Keywarden, one worker');
    const single = await serve({ DATABASE_URL: await freshDb() });
    const f = await fixture(single.base);
    const hbFile = writeLines(await heartbeatSessions(single.base, f, CONNECTIONS));
    const b = wrk('heartbeat.lua', single.base, { KW_SESSIONS: hbFile });
    const maxRate = rps(b);
    rows.push({ workload: '(b) signed heartbeats, 1 worker', rps: maxRate, ratio: maxRate / ceiling, note: b.non2xx ? `${b.non2xx} non-2xx` : '' });

    // (d) activations
    progress('(d) init, login and license calls per second');
    const sessionsFile = writeLines((await heartbeatSessions(single.base, f, CONNECTIONS)).map((l) => l.split(' ')[0]!));
    const envD = { KW_API_KEY: f.apiKey, KW_SESSIONS: sessionsFile, KW_USERNAME: f.username, KW_PASSWORD: f.password, KW_LICENSE: f.license };
    for (const call of ['init', 'license', 'login']) {
      const w = wrk('client.lua', single.base, { ...envD, KW_CALL: call });
      rows.push({ workload: `(d) ${call} per second, 1 worker`, rps: rps(w), ratio: rps(w) / ceiling, note: call === 'login' ? 'Argon2id verify per call, by design' : (w.non2xx ? `${w.non2xx} non-2xx` : '') });
    }

    // (f) latency at 50% and 90% of (b)
    for (const share of [0.5, 0.9]) {
      progress(`(f) latency at ${share * 100}% of the measured maximum`);
      const fresh = writeLines(await heartbeatSessions(single.base, f, CONNECTIONS));
      const delayMs = Math.max(0, Math.round((CONNECTIONS * 1000) / (maxRate * share)));
      const w = wrk('heartbeat.lua', single.base, { KW_SESSIONS: fresh, KW_DELAY_MS: String(delayMs) });
      rows.push({ workload: `(f) latency at ${share * 100}% load, 1 worker`, rps: rps(w), p50_ms: w.p50_us / 1000, p99_ms: w.p99_us / 1000, p999_ms: w.p999_us / 1000 });
    }

    await memoryWorkload(serve, freshDb);

    // (c) cluster mode
    for (const workers of [2, 3]) {
      progress(`(c) heartbeats with ${workers} workers (Redis)`);
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      start(['src/cli.ts', 'serve'], {
        PORT: String(port), HOST: '127.0.0.1', WORKERS: String(workers), REDIS_URL, REDIS_PREFIX: `kwbench${Date.now()}:`,
        DATABASE_URL: await freshDb(), DATA_DIR: path.join(dataDir, `cluster-${workers}`), LOG_LEVEL: 'warn', TRUSTED_PROXIES: '127.0.0.1',
        OWNER_USERNAME: OWNER.username, OWNER_PASSWORD: OWNER.password,
      });
      await until(`${workers} workers`, async () => {
        const ms = await workerMetrics(base, workers);
        return ms.length === workers && ms.every((m) => m.keywarden_cluster_members === workers) && ms.reduce((a, m) => a + (m.keywarden_cluster_owned_shards ?? 0), 0) === 1024;
      }, 90_000);
      const cf = await fixture(base);
      const file = writeLines(await heartbeatSessions(base, cf, CONNECTIONS));
      const sum = (ms: Record<string, number>[], k: string) => ms.reduce((a, m) => a + (m[k] ?? 0), 0);
      const m0 = await workerMetrics(base, workers);
      const w = wrk('heartbeat.lua', base, { KW_SESSIONS: file });
      const m1 = await workerMetrics(base, workers);
      const fwd = sum(m1, 'keywarden_cluster_forwarded_total') - sum(m0, 'keywarden_cluster_forwarded_total');
      const local = sum(m1, 'keywarden_cluster_local_total') - sum(m0, 'keywarden_cluster_local_total');
      rows.push({ workload: `(c) signed heartbeats, ${workers} workers`, rps: rps(w), ratio: rps(w) / ceiling, note: `${((100 * fwd) / Math.max(1, fwd + local)).toFixed(0)}% forwarded` });
      await cleanups.pop()?.();
    }
  } finally {
    for (const c of cleanups.reverse()) await c();
    if (embedded) await embedded.stop();
    report();
  }
}

type Serve = (env: Record<string, string>, nodeFlags?: string[]) => Promise<{ base: string; child: ChildProcess }>;

async function memoryWorkload(serve: Serve, freshDb: () => Promise<string>): Promise<void> {
  // (e) memory per live session
  for (const n of MEMORY_POINTS) {
    progress(`(e) memory with ${n} live sessions`);
    const mem = await serve({ DATABASE_URL: await freshDb() }, ['--expose-gc']);
    // The longest interval (expiry 6 x 300 s): creating 250k sessions takes longer than the
    // default 180 s expiry, and an expired session is not a live one.
    const mf = await fixture(mem.base, { heartbeat_interval: 300 });
    // Settled samples: a full collection before each (SIGUSR2 -> gc(), see src/cli.ts).
    const settled = async () => {
      mem.child.kill('SIGUSR2');
      await new Promise((r) => setTimeout(r, 500));
      return metrics(mem.base);
    };
    const before = await settled();
    await heartbeatSessions(mem.base, mf, n, 64);
    const after = await settled();
    const rss = ((after.keywarden_process_resident_memory_bytes ?? 0) - (before.keywarden_process_resident_memory_bytes ?? 0)) / n;
    const heap = ((after.keywarden_nodejs_heap_size_used_bytes ?? 0) - (before.keywarden_nodejs_heap_size_used_bytes ?? 0)) / n;
    rows.push({ workload: `(e) memory per live session at ${n}`, value: Math.round(rss), unit: 'bytes RSS', note: `heap ${Math.round(heap)} B/session; ${after.keywarden_heartbeat_sessions} sessions, ${after.keywarden_heartbeat_live_actors} live actors` });
    mem.child.kill('SIGTERM');
  }

}

function report(): void {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const machine = `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}, node ${process.version}`;
  const json = { at: new Date().toISOString(), quick, duration_s: DURATION_S, connections: CONNECTIONS, machine, rows };
  const fmt = (n?: number, d = 0) => (n === undefined ? '' : n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));
  const md = [
    `Run ${json.at} (${quick ? 'quick' : 'full'}: ${DURATION_S} s per wrk run, ${CONNECTIONS} connections) on ${machine}.`,
    '',
    '| Workload | req/s | ratio to (a) | p50 ms | p99 ms | p99.9 ms | value | notes |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map((r) => `| ${r.workload} | ${fmt(r.rps)} | ${r.ratio === undefined ? '' : r.ratio.toFixed(2)} | ${fmt(r.p50_ms, 2)} | ${fmt(r.p99_ms, 2)} | ${fmt(r.p999_ms, 2)} | ${r.value === undefined ? '' : `${fmt(r.value)} ${r.unit}`} | ${r.note ?? ''} |`),
  ].join('\n');
  const bars = rows.filter((r) => r.rps !== undefined && r.ratio !== undefined);
  const max = Math.max(...bars.map((r) => r.rps!));
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="760" height="${40 + bars.length * 28}" font-family="sans-serif" font-size="12">`,
    `<text x="10" y="20" font-weight="bold">Keywarden throughput (req/s, ratio to the bare uWS ceiling)</text>`,
    ...bars.map((r, i) => {
      const y = 32 + i * 28;
      const w = Math.max(2, (r.rps! / max) * 380);
      return `<text x="10" y="${y + 14}">${r.workload.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</text><rect x="330" y="${y}" width="${w}" height="18" fill="#4c78a8"/><text x="${336 + w}" y="${y + 14}">${fmt(r.rps)} (${r.ratio!.toFixed(2)})</text>`;
    }),
    '</svg>',
  ].join('\n');
  const dir = path.join(here, 'results');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${stamp}.json`), JSON.stringify(json, null, 2) + '\n');
  fs.writeFileSync(path.join(dir, `${stamp}.md`), md + '\n');
  fs.writeFileSync(path.join(dir, `${stamp}.svg`), svg + '\n');
  console.log(md);
  progress(`wrote bench/results/${stamp}.{json,md,svg}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
