// `npm run bench [-- --quick]`: measures Keywarden the way fleets load it and writes
// bench/results/<timestamp>.{json,md,svg}. Load comes from bench/gen/kwload.c (a native epoll
// generator, compiled here); Node only creates the application and its keys. Every throughput is
// reported as a ratio to workload (a), the bare uWebSockets.js ceiling, measured in the same run,
// with the CPU time all server processes spent per 1,000 accepted requests (read from /proc).
// Nothing here asserts a target: the verdict table says which are met and by how much the others
// are missed. How each number is taken: bench/README.md.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/platform/db/embedded-postgres.js';
import { MALLOC_DEFAULTS } from '../src/supervisor.js';
import { relayRows } from './relay.js';
import {
  buildKwload,
  compiledEntryPoints,
  channelCapable,
  cmdline,
  coresText,
  freshDatabase,
  kwhold,
  cpuDelta,
  descendants,
  fmt,
  freePort,
  gcBetween,
  here,
  kwload,
  machine,
  parseMetrics,
  procTable,
  progress,
  root,
  rowsTable,
  rssBytes,
  sumOf,
  troubles,
  type Classify,
  type KwResult,
  type Metrics,
  type Proc,
  type Row,
} from './lib.js';
import { releaseRows } from './releases.js';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const opt = (name: string): string | undefined => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const list = (v: string | undefined): number[] | undefined => v?.split(',').map((x) => Number(x.replace(/_/g, '')));
const DURATION_S = Number(opt('duration') ?? (quick ? 3 : 15));
const WARMUP_S = quick ? 1 : 2;
const CONNS = Number(opt('conns') ?? 64);
const GEN_THREADS = Number(opt('gen-threads') ?? 2);
const memoryOnly = list(opt('memory'));
const initMemoryOnly = list(opt('init-memory'));
const MEMORY_POINTS = memoryOnly ?? (quick ? [5_000] : [100_000]);
const INIT_MEMORY_POINTS = initMemoryOnly ?? (quick ? [10_000] : [100_000]);
const LATENCY_SHARES = quick ? [0.5] : [0.5, 0.9];
// The realtime channel: memory per connected client, and push latency across 2 workers.
const WS_MEMORY_POINTS = list(opt('ws-memory')) ?? (quick ? [2_000] : [10_000, 100_000]);
const WS_PUSH_CLIENTS = Number(opt('ws-push') ?? (quick ? 2_000 : 10_000));
// --cpu-prof: every server process writes a V8 CPU profile (node --cpu-prof) when it stops.
const CPU_PROF = argv.includes('--cpu-prof');
const ALL = [
  'ceiling',
  'hb1',
  'wshb1',
  'packed1',
  'init',
  'license',
  'login',
  'latency1',
  'memory',
  'initmem',
  'wsmem',
  'cluster2',
  'wspush',
  'cluster3',
  'download',
  'upgrade',
  'relay',
];
const only =
  opt('only')?.split(',') ??
  (memoryOnly || initMemoryOnly ? [...(memoryOnly ? ['memory'] : []), ...(initMemoryOnly ? ['initmem'] : [])] : ALL);
if (only.includes('latency1')) only.push('hb1'); // paced at a share of (b)'s maximum
if (only.includes('wshb1')) only.push('hb1'); // compared with it
const want = (id: string) => only.includes(id);
const OWNER = { username: 'benchowner', password: 'bench-pass-1' };
const HWID = 'bench-hwid-000000000000001';
const KEYS = 64; // one license key per connection (each re-activated by its connection's sessions)

const rows: Row[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-logs-'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function start(cmd: string, args: string[], env: Record<string, string>, name: string): ChildProcess {
  const log = fs.openSync(path.join(logDir, `${name}.log`), 'a');
  const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', log, log] });
  const stop = () => stopChild(child);
  cleanups.push(stop);
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  await exited;
  clearTimeout(timer);
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000, child?: ChildProcess): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}); logs in ${logDir}:\n${tailOfLogs()}`);
    }
    try {
      if (await cond()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (logs in ${logDir})`);
    await sleep(100);
  }
}

function tailOfLogs(): string {
  const newest = fs
    .readdirSync(logDir)
    .map((f) => path.join(logDir, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  return newest ? fs.readFileSync(newest, 'utf8').slice(-3000) : '';
}

// ---- the dashboard calls that create an application and its keys (not measured) -----------------

async function post(base: string, p: string, body: unknown, token?: string): Promise<any> {
  const res = await fetch(base + p, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: {
      'content-type': 'application/json',
      'x-forwarded-for': '192.0.2.1',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${p} -> ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function patch(base: string, p: string, body: unknown, token: string): Promise<void> {
  const res = await fetch(base + p, {
    method: 'PATCH',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
  });
  if (res.status !== 200) throw new Error(`${p} -> ${res.status} ${await res.text()}`);
}

interface Fixture {
  apiKey: string;
  appId: number;
  token: string;
  licenses: string[];
  licenseIds: number[];
  username: string;
  password: string;
}

async function fixture(base: string, settings: Record<string, unknown> = {}): Promise<Fixture> {
  const { token } = await post(base, '/api/auth/login', OWNER);
  const app = await post(base, '/api/apps', { name: `Bench ${Date.now()}` }, token);
  if (Object.keys(settings).length > 0) await patch(base, `/api/apps/${app.id}`, settings, token);
  const keys = (await post(base, `/api/apps/${app.id}/licenses`, { amount: KEYS + 1, unit: 'lifetime' }, token)) as {
    id: number;
    key: string;
  }[];
  const s = (await post(base, '/api/client/init', { api_key: app.api_key })).session;
  await post(base, '/api/client/register', {
    session: s,
    username: 'benchuser',
    password: 'bench-user-1',
    license: keys[KEYS]!.key,
    hwid: HWID,
  });
  return {
    apiKey: app.api_key,
    appId: app.id,
    token,
    licenses: keys.slice(0, KEYS).map((k) => k.key),
    licenseIds: keys.slice(0, KEYS).map((k) => k.id),
    username: 'benchuser',
    password: 'bench-user-1',
  };
}

// ---- servers --------------------------------------------------------------------------------------

interface Server {
  base: string;
  port: number;
  child: ChildProcess;
  workers: number;
  db: string;
}

async function metricsOnce(base: string): Promise<Metrics> {
  const res = await fetch(`${base}/metrics`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(10_000) });
  return parseMetrics(await res.text());
}

/** Per-worker metrics behind one shared port: scrape with fresh connections until every pid answered. */
async function workerMetrics(s: Server): Promise<Metrics[]> {
  const seen = new Map<number, Metrics>();
  for (let i = 0; i < 400 && seen.size < s.workers; i++) {
    const m = await metricsOnce(s.base);
    seen.set(m.keywarden_process_pid ?? i, m);
  }
  return [...seen.values()];
}

/** The worker processes: the server itself with one worker, else the supervisor's `cli worker` children. */
function workerPids(s: Server, table = procTable()): number[] {
  if (s.workers === 1) return [s.child.pid!];
  return [...descendants(table, s.child.pid!)].filter((pid) => / worker\b/.test(cmdline(pid)) && pid !== s.child.pid);
}

// ---- CPU groups ------------------------------------------------------------------------------------

let redisPid: number | undefined; // our own redis-server, when we started it
let ceilingPid: number | undefined;
const groupCache = new WeakMap<Map<number, Proc>, Map<number, string>>();

function classifier(server: Server | undefined): Classify {
  return (p, table) => {
    let groups = groupCache.get(table);
    if (!groups) {
      groups = new Map();
      const mine = descendants(table, process.pid);
      for (const q of table.values()) {
        if (q.comm === 'postgres' && (mine.has(q.pid) || (server && cmdline(q.pid).includes(` ${server.db} `))))
          groups.set(q.pid, 'postgres');
        // Redis counts where the server uses it (cluster mode): ours alone when we started one.
        else if (q.comm === 'redis-server' && server && server.workers > 1 && redisPid === undefined)
          groups.set(q.pid, 'redis');
      }
      if (redisPid !== undefined && server && server.workers > 1)
        for (const pid of descendants(table, redisPid)) groups.set(pid, 'redis');
      if (ceilingPid !== undefined) for (const pid of descendants(table, ceilingPid)) groups.set(pid, 'ceiling');
      if (server) {
        for (const pid of descendants(table, server.child.pid!))
          groups.set(pid, server.workers > 1 && pid === server.child.pid ? 'supervisor' : 'workers');
      }
      groupCache.set(table, groups);
    }
    return groups.get(p.pid) ?? null;
  };
}

// ---- one measured generator run --------------------------------------------------------------------

interface Measured {
  k: KwResult;
  cpu: Record<string, number>;
  m0?: Metrics[];
  m1?: Metrics[];
}

/** Waits (up to 30 s) until the server's processes are idle: work queued by one workload (slow
 * Argon2 logins, say) must not be billed to the next. */
async function quiesce(server: Server): Promise<void> {
  const classify = classifier(server);
  const end = Date.now() + 30_000;
  let prev = procTable();
  while (Date.now() < end) {
    await sleep(250);
    const next = procTable();
    const busy = Object.values(cpuDelta(prev, next, classify)).reduce((a, b) => a + b, 0) / 0.25;
    prev = next;
    if (busy < 0.05 + 0.02 * server.workers) return; // cluster workers renew leases in the background
  }
}

async function measure(port: number, server: Server | undefined, args: string[]): Promise<Measured> {
  if (server) await quiesce(server);
  let p0: Map<number, Proc> | undefined;
  let p1: Map<number, Proc> | undefined;
  let m0: Promise<Metrics[] | undefined> = Promise.resolve(undefined);
  let m1: Promise<Metrics[] | undefined> = Promise.resolve(undefined);
  const metricsOf = () => (server ? workerMetrics(server).catch(() => undefined) : Promise.resolve(undefined));
  const k = await kwload(
    [
      '--port',
      String(port),
      '--conns',
      String(CONNS),
      '--threads',
      String(GEN_THREADS),
      '--duration',
      String(DURATION_S),
      '--warmup',
      String(WARMUP_S),
      '--hwid',
      HWID,
      '--ip-base',
      String(nextIpBase()),
      ...args,
    ],
    {
      onStart: () => {
        p0 = procTable();
        m0 = metricsOf();
      },
      onEnd: () => {
        p1 = procTable();
        m1 = metricsOf();
      },
    },
  );
  const cpu = p0 && p1 ? cpuDelta(p0, p1, classifier(server)) : {};
  return { k, cpu, m0: await m0, m1: await m1 };
}

let ipBase = 0;
/** Each generator run takes its client addresses from a fresh range, so per-IP limits start empty. */
function nextIpBase(): number {
  ipBase = (ipBase + (1 << 20)) % (1 << 24);
  return ipBase;
}

function rowOf(id: string, workload: string, m: Measured, ceiling: number | undefined, note = ''): Row {
  const { k, cpu } = m;
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  const cores: Record<string, number> = {};
  for (const [g, s] of Object.entries(cpu)) cores[g] = s / k.duration_s;
  return {
    id,
    workload,
    system: 'keywarden',
    rps: k.ok_rps,
    ratio: ceiling ? k.ok_rps / ceiling : undefined,
    p50_ms: k.rate > 0 ? k.p50_us / 1000 : undefined,
    p99_ms: k.rate > 0 ? k.p99_us / 1000 : undefined,
    p999_ms: k.rate > 0 ? k.p999_us / 1000 : undefined,
    cpu_ms_per_1k: k.ok > 0 && total > 0 ? (total * 1e6) / k.ok : undefined,
    cores,
    gen_cores: k.cpu_window_s / k.duration_s,
    gc: m.m0 && m.m1 ? gcBetween(m.m0, m.m1) : undefined,
    non2xx: k.non2xx,
    errors: k.errors,
    note: [troubles(k), note].filter(Boolean).join('; '),
  };
}

// ---- the run ------------------------------------------------------------------------------------

async function main(): Promise<void> {
  buildKwload();
  const entry = await compiledEntryPoints();
  progress(`server logs in ${logDir}${CPU_PROF ? `, CPU profiles in ${path.join(logDir, 'profiles')}` : ''}`);
  progress(`${quick ? 'quick' : 'full'} run on ${machine()}; ${CONNS} connections on ${GEN_THREADS} generator threads`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let adminUrl = process.env.DATABASE_URL;
  let embedded: EmbeddedPostgres | undefined;
  if (!adminUrl && only.some((id) => id !== 'ceiling' && id !== 'relay')) {
    embedded = await startEmbeddedPostgres(path.join(dataDir, 'pgdata'), pino({ level: 'warn' }));
    const pgStop = embedded;
    cleanups.push(() => pgStop.stop()); // before its directory goes (cleanups run in reverse)
    const t = embedded.target;
    adminUrl = `postgresql://${t.user}:${encodeURIComponent(t.password)}@localhost:${t.port}/postgres?host=${encodeURIComponent(t.host)}`;
  }
  let dbSeq = 0;
  const freshDb = async (): Promise<{ url: string; name: string }> => {
    const name = `kwbench_${dbSeq++}_${process.pid}`;
    return { url: (await freshDatabase(adminUrl!, name)).url, name };
  };

  const serve = async (
    workers: number,
    nodeFlags: string[] = [],
    extraEnv: Record<string, string> = {},
  ): Promise<Server> => {
    const port = await freePort();
    const db = await freshDb();
    const env: Record<string, string> = {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: path.join(dataDir, `kw-${port}`),
      LOG_LEVEL: 'warn',
      TRUSTED_PROXIES: '127.0.0.0/8', // the generator binds to several (--bind)
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
      DATABASE_URL: db.url,
      REDIS_URL: '',
      ...extraEnv,
    };
    // As `npm start` runs it (package.json), unless this shell says otherwise.
    for (const [name, value] of Object.entries(MALLOC_DEFAULTS)) env[name] = process.env[name] ?? value;
    if (workers > 1)
      Object.assign(env, { WORKERS: String(workers), REDIS_URL: redisUrl!, REDIS_PREFIX: `kwbench${Date.now()}:` });
    const prof = CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.join(logDir, 'profiles')}`] : [];
    const child = start(
      process.execPath,
      [...nodeFlags, ...prof, entry.server, 'serve'],
      env,
      `keywarden-${workers}w-${port}`,
    );
    const s: Server = { base: `http://127.0.0.1:${port}`, port, child, workers, db: db.name };
    if (workers === 1) {
      await until('keywarden', async () => (await fetch(`${s.base}/readyz`)).status === 200, 60_000, child);
    } else {
      // Every worker answers, sees the others, and (where the metric exists) all shards are owned.
      await until(
        `${workers} workers`,
        async () => {
          if ((await fetch(`${s.base}/readyz`)).status !== 200) return false;
          const ms = await workerMetrics(s);
          if (ms.length !== workers) return false;
          if (ms.some((m) => m.keywarden_cluster_members !== undefined && m.keywarden_cluster_members !== workers))
            return false;
          const owned = sumOf(ms, 'keywarden_cluster_owned_shards');
          return ms.every((m) => m.keywarden_cluster_owned_shards === undefined) || owned === 1024;
        },
        120_000,
        child,
      );
    }
    return s;
  };
  const stop = async (s: Server) => {
    await stopChild(s.child);
  };

  let redisUrl = process.env.REDIS_URL;
  const needRedis =
    want('cluster2') ||
    want('cluster3') ||
    want('wspush') ||
    (want('wsmem') && WS_MEMORY_POINTS.some((n) => n > PER_PROCESS));
  if (needRedis && !redisUrl) redisUrl = await startRedis(dataDir);
  const sharedRedis = needRedis && process.env.REDIS_URL !== undefined;

  let ceiling: number | undefined;
  try {
    // (a) the ceiling
    if (want('ceiling')) {
      progress('(a) ceiling: bare uWebSockets.js + JSON + HMAC proof + Ed25519');
      const port = await freePort();
      const child = start(process.execPath, [entry.ceiling], { PORT: String(port) }, 'ceiling');
      ceilingPid = child.pid;
      await until(
        'ceiling',
        async () =>
          (
            await fetch(`http://127.0.0.1:${port}/api/client/heartbeat`, {
              method: 'POST',
              body: JSON.stringify({ session: 's', token: 't', beat_index: 1 }),
              signal: AbortSignal.timeout(1000),
            })
          ).status === 200,
      );
      const m = await measure(port, undefined, ['--mode', 'hb', '--fake-session']);
      ceiling = m.k.ok_rps;
      rows.push(rowOf('ceiling', '(a) ceiling: bare uWS handler, parse + proof + sign', m, ceiling));
      await stopChild(child);
      ceilingPid = undefined;
    }

    // (b), (d), (f): one worker
    if (['hb1', 'init', 'license', 'login', 'latency1'].some(want)) {
      const single = await serve(1);
      const f = await fixture(single.base);
      const base = ['--api-key', f.apiKey, '--license', f.licenses.join(',')];
      let max1: number | undefined;
      if (want('hb1')) {
        progress('(b) signed heartbeats through Keywarden, one worker');
        const m = await measure(single.port, single, ['--mode', 'hb', ...base]);
        max1 = m.k.ok_rps;
        rows.push(rowOf('hb1', '(b) signed heartbeats, 1 worker', m, ceiling));
      }
      if (want('wshb1') && channelCapable()) {
        progress('(g) heartbeats over the realtime channel, one worker');
        const m = await measure(single.port, single, ['--mode', 'ws-hb', ...base]);
        rows.push(rowOf('wshb1', '(g) channel heartbeats (WebSocket), 1 worker', m, ceiling, relativeCpu(m, 'hb1')));
      }
      for (const call of ['init', 'license'] as const) {
        if (!want(call)) continue;
        progress(`(d) ${call} per second, one worker`);
        const m = await measure(single.port, single, ['--mode', call, ...base]);
        const what = {
          init: 'init (a new unactivated session)',
          license: 'license (re-activation of an activated key)',
        }[call];
        rows.push(rowOf(call, `(d) ${what}, 1 worker`, m, ceiling));
      }
      if (want('latency1') && max1) {
        for (const share of LATENCY_SHARES) {
          progress(`(f) latency at ${share * 100}% of (b), one worker`);
          const m = await measure(single.port, single, [
            '--mode',
            'hb',
            ...base,
            '--rate',
            String(Math.round(max1 * share)),
          ]);
          rows.push(
            rowOf(`latency${share * 100}-1`, `(f) heartbeats paced at ${share * 100}% of (b), 1 worker`, m, undefined),
          );
        }
      }
      if (want('login')) {
        // last: its queued Argon2 work outlives the run
        progress('(d) login per second, one worker');
        const m = await measure(single.port, single, [
          '--mode',
          'login',
          ...base,
          '--username',
          f.username,
          '--password',
          f.password,
          '--conns',
          '16',
        ]);
        rows.push(
          rowOf('login', '(d) login, 1 worker', m, ceiling, 'Argon2id verify per call, by design; 16 connections'),
        );
      }
      await stop(single);
    }

    // Releases: a large download against nginx, and the upgrade check's CPU (bench/releases.ts).
    if (want('download') || want('upgrade')) {
      const s = await serve(1);
      const { token } = await post(s.base, '/api/auth/login', OWNER);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-releases-'));
      cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
      rows.push(...(await releaseRows({ base: s.base, pid: s.child.pid!, token }, { dir, quick, want })));
      await stop(s);
    }

    // A fleet's worker: past HEARTBEAT_MAX_LIVE_ACTORS (1,000) sessions most are packed, and a beat reads
    // and rewrites its packed slot. With the limit at 1 every one of the 64 connections' sessions is.
    if (want('packed1')) {
      const packed = await serve(1, [], { HEARTBEAT_MAX_LIVE_ACTORS: '1' });
      const f = await fixture(packed.base);
      const base = ['--api-key', f.apiKey, '--license', f.licenses.join(',')];
      const note = 'HEARTBEAT_MAX_LIVE_ACTORS=1: every session packed, as most are on a worker of a fleet';
      progress('(b) signed heartbeats, every session packed, one worker');
      const m = await measure(packed.port, packed, ['--mode', 'hb', ...base]);
      const vsUnpacked = (x: Measured, id: string) => relativeCpu(x, id, "an unpacked session's");
      rows.push(
        rowOf(
          'hbpacked1',
          '(b) signed heartbeats, every session packed, 1 worker',
          m,
          ceiling,
          [note, vsUnpacked(m, 'hb1')].filter(Boolean).join('; '),
        ),
      );
      if (channelCapable()) {
        progress('(g) channel heartbeats, every session packed, one worker');
        const w = await measure(packed.port, packed, ['--mode', 'ws-hb', ...base]);
        rows.push(
          rowOf(
            'wshbpacked1',
            '(g) channel heartbeats (WebSocket), every session packed, 1 worker',
            w,
            ceiling,
            [note, vsUnpacked(w, 'wshb1')].filter(Boolean).join('; '),
          ),
        );
      }
      await stop(packed);
    }

    if (want('memory')) for (const n of MEMORY_POINTS) await memoryPoint(serve, stop, n);
    if (want('initmem')) for (const n of INIT_MEMORY_POINTS) await initMemoryPoint(serve, stop, n);
    if (want('wsmem') && channelCapable()) {
      for (const n of WS_MEMORY_POINTS) await survive(`wsmem-${n}`, () => channelMemoryPoint(serve, stop, n));
    }
    if (want('wspush') && channelCapable())
      await survive(`wspush-${WS_PUSH_CLIENTS}`, () => pushLatency(serve, stop, WS_PUSH_CLIENTS));

    // (c) cluster mode
    for (const workers of [2, 3]) {
      if (!want(`cluster${workers}`)) continue;
      progress(`(c) heartbeats with ${workers} workers (Redis ${sharedRedis ? 'at REDIS_URL, shared' : 'of our own'})`);
      const s = await serve(workers);
      const f = await fixture(s.base);
      const base = ['--api-key', f.apiKey, '--license', f.licenses.join(',')];
      const m = await measure(s.port, s, ['--mode', 'hb', ...base]);
      rows.push(rowOf(`hb${workers}`, `(c) signed heartbeats, ${workers} workers`, m, ceiling, forwarded(m)));
      if (workers === 2 && channelCapable()) {
        progress(`(g) heartbeats over the realtime channel, ${workers} workers`);
        const w = await measure(s.port, s, ['--mode', 'ws-hb', ...base]);
        rows.push(
          rowOf(
            `wshb${workers}`,
            `(g) channel heartbeats (WebSocket), ${workers} workers`,
            w,
            ceiling,
            [relativeCpu(w, `hb${workers}`), forwarded(w)].filter(Boolean).join('; '),
          ),
        );
      }
      if (workers === 2) {
        progress(`(f) latency at 50% of (c), ${workers} workers`);
        const p = await measure(s.port, s, ['--mode', 'hb', ...base, '--rate', String(Math.round(m.k.ok_rps * 0.5))]);
        rows.push(
          rowOf(
            `latency50-${workers}`,
            `(f) heartbeats paced at 50% of (c), ${workers} workers`,
            p,
            undefined,
            forwarded(p),
          ),
        );
      }
      await stop(s);
    }
    // (h) the seat relay for air-gapped networks: no server, no database
    if (want('relay')) {
      progress('(h) keywarden relay: lease renewals on one core, memory at 10,000 leases');
      await survive('relay', async () => {
        rows.push(...(await relayRows({ serverEntry: entry.server, durationS: DURATION_S, warmupS: WARMUP_S })));
      });
    }
  } finally {
    for (const c of cleanups.reverse()) await c();
    report();
  }
}

/** Runs a workload whose failure (many processes, many connections) should not end the whole run: a row says what failed. */
async function survive(id: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    progress(`${id} failed: ${(err as Error).message}`);
    rows.push({
      id,
      workload: id,
      system: 'keywarden',
      note: `**INVALID: failed: ${(err as Error).message.slice(0, 300)}**`,
    });
  }
}

/** A channel row's server CPU per beat as a share of its REST twin's (the target: at most a third). */
function relativeCpu(m: Measured, restId: string, what = "the REST beat's"): string {
  const rest = rows.find((r) => r.id === restId)?.cpu_ms_per_1k;
  const total = Object.values(m.cpu).reduce((a, b) => a + b, 0);
  const ours = m.k.ok > 0 ? (total * 1e6) / m.k.ok : undefined;
  return rest && ours ? `server CPU per beat ${(ours / rest).toFixed(2)} x ${what} (${restId})` : '';
}

function forwarded(m: Measured): string {
  if (!m.m0 || !m.m1) return '';
  const d = (k: string) => sumOf(m.m1!, k) - sumOf(m.m0!, k);
  const fwd = d('keywarden_cluster_forwarded_total');
  const local = d('keywarden_cluster_local_total');
  const direct = d('keywarden_cluster_direct_total');
  const pubsub = d('keywarden_cluster_pubsub_total');
  const how =
    direct + pubsub > 0 ? `; ${fmt(direct)} over direct connections, ${fmt(pubsub)} through Redis pub/sub` : '';
  return fwd + local > 0
    ? `${((100 * fwd) / (fwd + local)).toFixed(0)}% of actor operations forwarded (${fmt(fwd)} of ${fmt(fwd + local)}${how})`
    : '';
}

/** A Redis of our own (no other tenant's CPU in the figures), durable as in production: AOF, fsync every second. */
async function startRedis(dataDir: string): Promise<string> {
  if (spawnSync('redis-server', ['--version']).error) return 'redis://127.0.0.1:6379';
  const port = await freePort();
  const dir = path.join(dataDir, 'redis');
  fs.mkdirSync(dir, { recursive: true });
  const child = start(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
    ],
    {},
    'redis',
  );
  redisPid = child.pid;
  await until(
    'redis',
    () =>
      new Promise<boolean>((resolve) => {
        const sock = net.connect(port, '127.0.0.1', () => sock.write('PING\r\n'));
        sock.once('data', (d) => {
          sock.destroy();
          resolve(d.toString().startsWith('+PONG'));
        });
        sock.once('error', () => resolve(false));
      }),
  );
  return `redis://127.0.0.1:${port}`;
}

type Serve = (workers: number, nodeFlags?: string[]) => Promise<Server>;

/**
 * Resident memory of every worker after forced full collections (SIGUSR2 -> gc(), src/cli.ts),
 * repeated until RSS stops shrinking: after one collection V8 has not yet given the freed pages
 * back (measured: 4,794 B/session after one, 634 B after three more), so a single one would
 * measure V8's timing rather than what the sessions hold.
 */
async function settled(s: Server): Promise<{ rss: number; heap: number; m: Metrics[] }> {
  const pids = workerPids(s);
  const rssNow = () => pids.reduce((a, pid) => a + rssBytes(pid), 0);
  let before = rssNow();
  for (let round = 0; round < 6; round++) {
    for (const pid of pids) process.kill(pid, 'SIGUSR2');
    await sleep(500);
    const after = rssNow();
    if (after > before * 0.99) break;
    before = after;
  }
  const m = await workerMetrics(s); // answered after the collections ran on each worker's loop
  let rss = rssNow();
  for (let i = 0; i < 20; i++) {
    // let the kernel's view settle
    await sleep(250);
    const next = pids.reduce((a, pid) => a + rssBytes(pid), 0);
    if (Math.abs(next - rss) < rss * 0.002) break;
    rss = next;
  }
  return { rss, heap: sumOf(m, 'keywarden_nodejs_heap_size_used_bytes'), m };
}

async function memoryPoint(serve: Serve, stop: (s: Server) => Promise<void>, n: number): Promise<void> {
  progress(`(e) memory with ${fmt(n)} live heartbeat sessions`);
  // Past half a million sessions the heap may outgrow V8's default limit (about 4 GiB): raised, as an
  // operator hosting that many sessions on one worker would.
  const s = await serve(1, ['--expose-gc', ...(n >= 500_000 ? ['--max-old-space-size=12288'] : [])]);
  // The longest interval (expiry 6 x 300 s = 30 min): an expired session is not a live one.
  const f = await fixture(s.base, { heartbeat_interval: 300 });
  const before = await settled(s);
  // Two passes, so every heartbeat starts within minutes of the others (a session expires 30 minutes
  // after its last beat, and a million activations take longer than that here): first init ->
  // license for all of them (client sessions live 24 hours), then heartbeat/start for each.
  const file = path.join(logDir, `sessions-${n}.txt`);
  const common = [
    '--port',
    String(s.port),
    '--mode',
    'setup',
    '--conns',
    String(CONNS),
    '--threads',
    String(GEN_THREADS),
    '--api-key',
    f.apiKey,
    '--license',
    f.licenses.join(','),
    '--hwid',
    HWID,
    '--quiet',
  ];
  const auth = await kwload([
    ...common,
    '--total',
    String(n),
    '--ip-base',
    String(nextIpBase()),
    '--sessions-out',
    file,
  ]);
  const k = await kwload([...common, '--sessions-in', file, '--ip-base', String(nextIpBase())]);
  fs.rmSync(file);
  const after = await settled(s);
  const live = sumOf(after.m, 'keywarden_heartbeat_sessions');
  const valid = k.ok > 0 && (live === 0 || live >= 0.99 * k.ok);
  rows.push({
    id: `memory-${n}`,
    workload: `(e) memory per live heartbeat session at ${fmt(n)}`,
    system: 'keywarden',
    value: Math.round((after.rss - before.rss) / Math.max(1, k.ok)),
    unit: 'B RSS',
    note: [
      valid ? '' : `**INVALID: ${fmt(live)} of ${fmt(k.ok)} sessions live at the sample**`,
      `heap ${fmt((after.heap - before.heap) / Math.max(1, k.ok))} B/session`,
      `${fmt(live)} sessions, ${fmt(sumOf(after.m, 'keywarden_heartbeat_live_actors'))} live actors`,
      `RSS ${fmt(before.rss / 2 ** 20)} -> ${fmt(after.rss / 2 ** 20)} MiB`,
      `setup ${fmt(auth.duration_s + k.duration_s)} s: init and license ${fmt(auth.duration_s)} s (${fmt(auth.ok_rps)}/s), then heartbeat/start ${fmt(k.duration_s)} s (${fmt(k.ok_rps)}/s)`,
      auth.prep_fail + k.prep_fail ? `${auth.prep_fail + k.prep_fail} failed calls` : '',
      trimNote(before.m, after.m),
    ]
      .filter(Boolean)
      .join('; '),
  });
  await stop(s);
}

async function initMemoryPoint(serve: Serve, stop: (s: Server) => Promise<void>, n: number): Promise<void> {
  progress(`(e) memory per unactivated init session, ${fmt(n)} inits`);
  const s = await serve(1, ['--expose-gc']);
  const f = await fixture(s.base);
  const pool = Math.max(1024, Math.ceil(n / 25)); // 25 inits per address: under init's 30 per minute
  const before = await settled(s);
  const k = await kwload([
    '--port',
    String(s.port),
    '--mode',
    'inits',
    '--total',
    String(n),
    '--conns',
    String(CONNS),
    '--threads',
    String(GEN_THREADS),
    '--api-key',
    f.apiKey,
    '--ip-base',
    String(nextIpBase()),
    '--ip-pool',
    String(pool),
    '--quiet',
  ]);
  const after = await settled(s);
  const made = k.ok; // sessions that exist: a shed (503) or limited (429) init leaves nothing behind
  rows.push({
    id: `initmem-${n}`,
    workload: `(e) memory per unactivated init session, ${fmt(n)} inits`,
    system: 'keywarden',
    value: Math.round((after.rss - before.rss) / Math.max(1, made)),
    unit: 'B RSS',
    note: [
      `heap ${fmt((after.heap - before.heap) / Math.max(1, made))} B/init`,
      `${fmt(k.ok)} answered 200, ${fmt(k.shed)} shed with 503, ${fmt(k.limited)} limited with 429`,
      `from ${fmt(pool)} addresses`,
      `RSS ${fmt(before.rss / 2 ** 20)} -> ${fmt(after.rss / 2 ** 20)} MiB`,
      `${fmt(k.duration_s, 1)} s`,
      k.prep_fail ? `**${k.prep_fail} failed calls**` : '',
      trimNote(before.m, after.m),
    ]
      .filter(Boolean)
      .join('; '),
  });
  await stop(s);
}

// ---- the realtime channel: memory per connected client, push latency ----------------------------

/** Open files per process here (`ulimit -n`): each generator process and each worker stays well below it. */
const FD_LIMIT = Number(/Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 1024);
const PER_PROCESS = Math.max(1_000, Math.floor(FD_LIMIT * 0.8));

/**
 * `n` channels held open, spread over generator processes of at most PER_PROCESS connections, each
 * from its own loopback source address (a source address has about 28,000 ports towards one port).
 */
function holdChannels(s: Server, f: Fixture, n: number): ReturnType<typeof kwhold>[] {
  const procs = Math.ceil(n / PER_PROCESS);
  return Array.from({ length: procs }, (_, i) => {
    const conns = Math.floor((n * (i + 1)) / procs) - Math.floor((n * i) / procs);
    return kwhold([
      '--port',
      String(s.port),
      '--conns',
      String(conns),
      '--threads',
      String(GEN_THREADS),
      '--api-key',
      f.apiKey,
      '--license',
      f.licenses.join(','),
      '--hwid',
      HWID,
      '--ip-base',
      String(nextIpBase()),
      '--bind',
      `127.0.0.${2 + i}`,
      '--prep-window',
      String(CONNS),
      '--prep-timeout',
      '3600',
      '--quiet',
    ]);
  });
}

async function channelMemoryPoint(serve: Serve, stop: (s: Server) => Promise<void>, n: number): Promise<void> {
  // A worker holds at most PER_PROCESS connections (the open-files limit): more clients, more workers.
  const workers = Math.ceil(n / PER_PROCESS);
  progress(
    `(g) memory with ${fmt(n)} clients connected to the realtime channel, ${workers} worker${workers > 1 ? 's' : ''}`,
  );
  const s = await serve(workers, ['--expose-gc']);
  const f = await fixture(s.base, { heartbeat_interval: 300 }); // no beat needed while the memory is read
  const before = await settled(s);
  const t0 = Date.now();
  const holds = holdChannels(s, f, n);
  try {
    await Promise.all(holds.map((h) => h.ready));
    const setup = (Date.now() - t0) / 1000;
    const after = await settled(s);
    const connected = sumOf(after.m, 'keywarden_channel_connections');
    const live = sumOf(after.m, 'keywarden_heartbeat_sessions');
    const per = connected > 0 ? (after.rss - before.rss) / connected : undefined;
    const rest = rows.find((r) => r.id === `memory-${n}`)?.value ?? rows.find((r) => r.id.startsWith('memory-'))?.value;
    rows.push({
      id: `wsmem-${n}`,
      workload: `(g) memory per client connected to the channel at ${fmt(n)} (${workers} worker${workers > 1 ? 's' : ''})`,
      system: 'keywarden',
      value: per === undefined ? undefined : Math.round(per),
      unit: 'B RSS',
      note: [
        connected < 0.99 * n ? `**INVALID: ${fmt(connected)} of ${fmt(n)} connected at the sample**` : '',
        `the connection and its live heartbeat session together${rest ? ` (a live REST session alone: ${fmt(rest)} B)` : ''}`,
        `heap ${fmt((after.heap - before.heap) / Math.max(1, connected))} B/client`,
        `${fmt(connected)} connected, ${fmt(live)} live sessions`,
        `RSS ${fmt(before.rss / 2 ** 20)} -> ${fmt(after.rss / 2 ** 20)} MiB`,
        `setup ${fmt(setup)} s (init, license, upgrade, heartbeat/start)`,
        trimNote(before.m, after.m),
        `${holds.length} generator process${holds.length > 1 ? 'es' : ''}`,
      ]
        .filter(Boolean)
        .join('; '),
    });
  } finally {
    await Promise.allSettled(holds.map((h) => h.stop()));
    await stop(s);
  }
}

/** The workers' malloc_trim calls between two samples (MEMORY_TRIM_MS), and their time. */
function trimNote(before: Metrics[], after: Metrics[]): string {
  const d = (k: string) => sumOf(after, k) - sumOf(before, k);
  const trims = d('keywarden_memory_trims_total');
  return trims > 0
    ? `${fmt(trims)} malloc_trim calls, ${((d('keywarden_memory_trim_seconds_total') * 1000) / trims).toFixed(1)} ms each`
    : '';
}

const pct = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;

/**
 * Push latency with `n` clients connected across 2 workers: a dashboard notice to all of them, then
 * each of the 64 keys banned in turn (about n/64 clients each), timed from just before the
 * dashboard request leaves to the client's receipt of `revoked` (CLOCK_MONOTONIC in both processes).
 */
async function pushLatency(serve: Serve, stop: (s: Server) => Promise<void>, n: number): Promise<void> {
  progress(`(g) push latency with ${fmt(n)} clients connected to the channel, 2 workers`);
  const s = await serve(2);
  const f = await fixture(s.base, { heartbeat_interval: 300 });
  const holds = holdChannels(s, f, n);
  // connection ids restart at 0 in each generator process: (process, id) names a client
  const got = new Map<string, { client: string; ns: bigint }[]>();
  let wake: () => void = () => {};
  holds.forEach((h, i) =>
    h.onEvent((type, conn, ns) => {
      const list = got.get(type) ?? [];
      list.push({ client: `${i}:${conn}`, ns });
      got.set(type, list);
      wake();
    }),
  );
  const waitFor = async (type: string, count: number, ms: number) => {
    const end = Date.now() + ms;
    while ((got.get(type)?.length ?? 0) < count && Date.now() < end) {
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 50);
      });
    }
  };
  try {
    await Promise.all(holds.map((h) => h.ready));
    const connected = sumOf(await workerMetrics(s), 'keywarden_channel_connections');
    await quiesce(s);
    const ms = (from: bigint, e: { ns: bigint }) => Number(e.ns - from) / 1e6;
    // the notice: one dashboard call, every client
    const t0 = process.hrtime.bigint();
    await post(s.base, `/api/apps/${f.appId}/notice`, { message: 'bench notice' }, f.token);
    await waitFor('notice', connected, 10_000);
    const notice = (got.get('notice') ?? []).map((e) => ms(t0, e)).sort((a, b) => a - b);
    // the bans, one key after another
    const bans: number[] = [];
    let missing = 0;
    for (let i = 0; i < f.licenseIds.length; i++) {
      const before = got.get('revoked')?.length ?? 0;
      const expected = holds.reduce((a, _, p) => {
        // clients of key i in each process: ids i, i + 64, ...
        const conns = Math.floor((n * (p + 1)) / holds.length) - Math.floor((n * p) / holds.length);
        return a + Math.max(0, Math.ceil((conns - i) / f.licenseIds.length));
      }, 0);
      const t = process.hrtime.bigint();
      await patch(s.base, `/api/licenses/${f.licenseIds[i]}/ban`, { banned: true }, f.token);
      await waitFor('revoked', before + expected, 5_000);
      const mine = (got.get('revoked') ?? []).slice(before);
      for (const e of mine) bans.push(ms(t, e));
      missing += Math.max(0, expected - mine.length);
    }
    for (let i = 0; i < missing; i++) bans.push(Infinity); // never arrived within 5 s: counted, as the slowest
    bans.sort((a, b) => a - b);
    rows.push({
      id: `wspush-${n}`,
      workload: `(g) push latency, dashboard ban to client \`revoked\`, ${fmt(n)} clients on 2 workers`,
      system: 'keywarden',
      p50_ms: pct(bans, 50),
      p99_ms: pct(bans, 99),
      p999_ms: pct(bans, 99.9),
      value: pct(bans, 99),
      unit: 'ms p99',
      note: [
        missing > 0 ? `**${missing} of ${bans.length} revocations not received within 5 s**` : '',
        `${fmt(bans.length)} revocations from ${f.licenseIds.length} bans (one key after another, about ${fmt(n / f.licenseIds.length)} clients each); max ${fmt(bans.at(-1), 1)} ms`,
        `a notice to all ${fmt(connected)} clients: ${fmt(notice.length)} received, p50 ${fmt(pct(notice, 50), 1)} ms, p99 ${fmt(pct(notice, 99), 1)} ms, last ${fmt(notice.at(-1), 1)} ms`,
      ]
        .filter(Boolean)
        .join('; '),
    });
  } finally {
    await Promise.allSettled(holds.map((h) => h.stop()));
    await stop(s);
  }
}

// ---- targets, read off the rows --------------------------------------------------------------------

interface Verdict {
  group: string;
  target: string;
  measured: string;
  verdict: string;
}

const atLeast = (v: number | undefined, t: number, d: number, unit = '') =>
  v === undefined
    ? 'not measured'
    : v >= t
      ? 'met'
      : `missed by ${fmt(t - v, d)}${unit} (${(((t - v) / t) * 100).toFixed(0)}%)`;
const atMost = (v: number | undefined, t: number, d: number, unit = '') =>
  v === undefined
    ? 'not measured'
    : v <= t
      ? 'met'
      : `missed by ${fmt(v - t, d)}${unit} (${(((v - t) / t) * 100).toFixed(0)}%)`;
const by = (id: string) => rows.find((r) => r.id === id);

/** One worker's throughput against (a), one verdict per [row id, least ratio, what]. */
function ratioVerdicts(group: string, targets: readonly (readonly [string, number, string])[]): Verdict[] {
  return targets.map(([id, t, what]) => ({
    group,
    target: `one worker: ${what} >= ${t} of (a)`,
    measured: by(id)?.ratio?.toFixed(2) ?? '',
    verdict: atLeast(by(id)?.ratio, t, 2),
  }));
}

function verdicts(): Verdict[] {
  const out: Verdict[] = ratioVerdicts('1', [
    ['hb1', 0.8, 'signed heartbeats'],
    ['init', 0.8, 'init'],
    ['license', 0.3, 'license (activated key)'],
  ]);
  const relay = by('relay');
  if (relay)
    out.push({
      group: '8',
      target: 'relay lease renewals >= 10,000/s on one core',
      measured: relay.rps === undefined ? '' : `${fmt(relay.rps)}/s`,
      verdict: atLeast(relay.rps, 10_000, 0, '/s'),
    });
  const cpu1 = by('hb1')?.cpu_ms_per_1k;
  for (const w of [2, 3]) {
    const cw = by(`hb${w}`)?.cpu_ms_per_1k;
    const rel = cpu1 && cw ? cw / cpu1 : undefined;
    out.push({
      group: '2',
      target: `server CPU per 1,000 beats, ${w} workers <= 1.25 x 1 worker`,
      measured: rel === undefined ? '' : `${rel.toFixed(2)} x (${fmt(cw, 1)} vs ${fmt(cpu1, 1)} ms)`,
      verdict: atMost(rel, 1.25, 2, ' x'),
    });
  }
  const r1 = by('hb1');
  const r2 = by('hb2');
  if (r1?.rps && r2?.rps && r2.gen_cores !== undefined) {
    const ncpu = os.cpus().length;
    const adjusted = (r2.rps * ncpu) / Math.max(0.1, ncpu - r2.gen_cores);
    const rel = adjusted / r1.rps;
    out.push({
      group: '2',
      target: '2 workers >= 1.5 x 1 worker throughput, generator CPU accounted for',
      measured: `${rel.toFixed(2)} x (${fmt(r2.rps)}/s raw, ${fmt(adjusted)}/s with the generator's ${r2.gen_cores.toFixed(2)} cores given back, vs ${fmt(r1.rps)}/s)`,
      verdict: atLeast(rel, 1.5, 2, ' x'),
    });
  } else
    out.push({ group: '2', target: '2 workers >= 1.5 x 1 worker throughput', measured: '', verdict: 'not measured' });
  for (const w of [1, 2]) {
    const r = by(`latency50-${w}`);
    const tag = quick ? ' (quick run: indicative only)' : '';
    out.push({
      group: '3',
      target: `p99 <= 5 ms at 50% load, ${w} worker${w > 1 ? 's' : ''}`,
      measured: r?.p99_ms?.toFixed(2) ?? '',
      verdict: atMost(r?.p99_ms, 5, 2, ' ms') + (r ? tag : ''),
    });
    out.push({
      group: '3',
      target: `p99.9 <= 20 ms at 50% load, ${w} worker${w > 1 ? 's' : ''}`,
      measured: r?.p999_ms?.toFixed(2) ?? '',
      verdict: atMost(r?.p999_ms, 20, 2, ' ms') + (r ? tag : ''),
    });
  }
  for (const n of [100_000, 1_000_000]) {
    const r = by(`memory-${n}`);
    out.push({
      group: '4',
      target: `<= 2 KB (2,048 B) per live heartbeat session at ${fmt(n)}`,
      measured: r?.value !== undefined ? `${fmt(r.value)} B` : '',
      verdict: r?.note?.includes('INVALID')
        ? 'invalid (see row)'
        : r
          ? atMost(r.value, 2048, 0, ' B')
          : `not measured in this run (npm run bench -- --memory=${n})`,
    });
  }
  const others = rows.filter((r) => r.id.startsWith('memory-') && !['memory-100000', 'memory-1000000'].includes(r.id));
  for (const r of others)
    out.push({
      group: '4',
      target: `(indicative) per live session at ${fmt(Number(r.id.slice(7)))}`,
      measured: `${fmt(r.value)} B`,
      verdict: atMost(r.value, 2048, 0, ' B'),
    });
  const im = rows.filter((r) => r.id.startsWith('initmem-'));
  if (im.length === 0)
    out.push({ group: '4', target: '<= 100 B per unactivated init session', measured: '', verdict: 'not measured' });
  for (const r of im)
    out.push({
      group: '4',
      target: `<= 100 B per unactivated init session (${fmt(Number(r.id.slice(8)))} inits)`,
      measured: `${fmt(r.value)} B`,
      verdict: atMost(r.value, 100, 0, ' B'),
    });
  const peer = peerResults();
  out.push({
    group: '5',
    target: 'the three peer workloads against KeyAuth (bench/peer/keyauth.ts)',
    measured: peer ? `${peer.rows.length} rows from ${peer.at}` : '',
    verdict: peer
      ? 'side-by-side table below'
      : 'not in this run: KEYAUTH_DIR=... npm run bench:keyauth (bench/README.md)',
  });
  // group 6: the realtime channel
  const noWs = channelCapable()
    ? 'not measured'
    : 'not measured: the generator needs libsodium (apt-get install libsodium-dev)';
  for (const w of [1, 2]) {
    const ws = by(`wshb${w}`)?.cpu_ms_per_1k;
    const rest = by(`hb${w}`)?.cpu_ms_per_1k;
    const rel = ws && rest ? ws / rest : undefined;
    out.push({
      group: '6',
      target: `a channel beat <= 1/3 of a REST beat's server CPU, ${w} worker${w > 1 ? 's' : ''}`,
      measured: rel === undefined ? '' : `${rel.toFixed(2)} x (${fmt(ws, 1)} vs ${fmt(rest, 1)} ms per 1k)`,
      verdict: rel === undefined ? noWs : atMost(rel, 1 / 3, 2, ' x'),
    });
  }
  const push = rows.find((r) => r.id.startsWith('wspush-'));
  out.push({
    group: '6',
    target: `push latency p99 < 1 s at ${push ? fmt(Number(push.id.slice(7))) : '10,000'} connected clients, 2 workers`,
    measured: push ? `p50 ${fmt(push.p50_ms, 1)} ms, p99 ${fmt(push.p99_ms, 1)} ms` : '',
    verdict: !push
      ? noWs
      : push.p99_ms === undefined
        ? 'invalid (see row)'
        : push.p99_ms < 1000
          ? 'met'
          : Number.isFinite(push.p99_ms)
            ? `missed by ${fmt(push.p99_ms - 1000)} ms`
            : 'missed: over 1% of revocations never arrived',
  });
  const wsm = rows.filter((r) => r.id.startsWith('wsmem-'));
  if (wsm.length === 0)
    out.push({ group: '6', target: '<= 4 KB (4,096 B) per connected client', measured: '', verdict: noWs });
  for (const r of wsm) {
    out.push({
      group: '6',
      target: `<= 4 KB (4,096 B) per connected client at ${fmt(Number(r.id.slice(6)))}`,
      measured: r.value === undefined ? '' : `${fmt(r.value)} B`,
      verdict: r.note?.includes('INVALID') ? 'invalid (see row)' : atMost(r.value, 4096, 0, ' B'),
    });
  }
  out.push(...hotPath(noWs));
  return out;
}

/** Group 7: the hot-path targets (the issue "a heartbeat costs what the protocol costs"). */
function hotPath(noWs: string): Verdict[] {
  const out: Verdict[] = [];
  const ceilingCpu = by('ceiling')?.cpu_ms_per_1k;
  for (const w of [1, 2]) {
    const ws = by(`wshb${w}`)?.cpu_ms_per_1k;
    const rel = ws && ceilingCpu ? ws / ceilingCpu : undefined;
    out.push({
      group: '7',
      target: `channel beat: server CPU per beat <= 0.8 x the ceiling's per request, ${w} worker${w > 1 ? 's' : ''}`,
      measured: rel === undefined ? '' : `${rel.toFixed(2)} x (${fmt(ws, 1)} vs ${fmt(ceilingCpu, 1)} ms per 1k)`,
      verdict: rel === undefined ? (ceilingCpu ? noWs : 'not measured') : atMost(rel, 0.8, 2, ' x'),
    });
  }
  out.push(
    ...ratioVerdicts('7', [
      ['hb1', 0.6, 'REST beat'],
      ['init', 0.6, '`init`'],
      ['license', 0.15, 'license re-activation (activated key)'],
    ]),
  );
  for (const w of [1, 2]) {
    const r = by(`latency50-${w}`);
    out.push({
      group: '7',
      target: `GC pauses at 50% load, ${w} worker${w > 1 ? 's' : ''} (reported; p99/p99.9 in group 3)`,
      measured: r?.note?.match(/GC \d+ pauses[^;|]*/)?.[0] ?? '',
      verdict: r ? 'reported' : 'not measured',
    });
  }
  const peer = peerResults();
  const ours = by('hb1');
  const theirs = peer?.rows.find((r) => r.id === 'hb1');
  const rps = ours?.rps && theirs?.rps ? ours.rps / theirs.rps : undefined;
  const cpu = ours?.cpu_ms_per_1k && theirs?.cpu_ms_per_1k ? theirs.cpu_ms_per_1k / ours.cpu_ms_per_1k : undefined;
  const missing = peer ? 'not measured' : 'not in this run: KEYAUTH_DIR=... npm run bench:keyauth (bench/README.md)';
  out.push({
    group: '7',
    target: 'one-worker heartbeat >= 3 x KeyAuth `check` throughput',
    measured: rps === undefined ? '' : `${rps.toFixed(1)} x`,
    verdict: rps === undefined ? missing : atLeast(rps, 3, 1, ' x'),
  });
  out.push({
    group: '7',
    target: 'one-worker heartbeat >= 5 x less server CPU per call than KeyAuth `check`',
    measured: cpu === undefined ? '' : `${cpu.toFixed(1)} x less`,
    verdict: cpu === undefined ? missing : atLeast(cpu, 5, 1, ' x'),
  });
  const mem = by('memory-100000');
  out.push({
    group: '7',
    target: '<= 1 KB (1,024 B) per live session at 100,000',
    measured: mem?.value !== undefined ? `${fmt(mem.value)} B` : '',
    verdict: mem ? atMost(mem.value, 1024, 0, ' B') : 'not measured in this run (npm run bench -- --memory=100000)',
  });
  return out;
}

interface PeerFile {
  at: string;
  machine: string;
  rows: Row[];
  setup?: string;
  quick?: boolean;
}
let peerCache: PeerFile | null | undefined;
/** The newest KeyAuth result (bench/peer/keyauth.ts), or the file named by --peer=. */
function peerResults(): PeerFile | null {
  if (peerCache !== undefined) return peerCache;
  const dir = path.join(here, 'results');
  const named = opt('peer');
  const files = named
    ? [named]
    : fs.existsSync(dir)
      ? fs
          .readdirSync(dir)
          .filter((f) => /^keyauth-.*\.json$/.test(f))
          .sort()
          .map((f) => path.join(dir, f))
      : [];
  const file = files.at(-1);
  peerCache = file ? (JSON.parse(fs.readFileSync(file, 'utf8')) as PeerFile) : null;
  return peerCache;
}

function sideBySide(): string {
  const peer = peerResults();
  if (!peer) return '';
  const pairs: [string, string, string][] = [
    ['hb1', 'hb1', 'heartbeat vs KeyAuth `check`'],
    ['init', 'init', '`init`'],
    ['license', 'license', '`license` (activated key)'],
  ];
  const lines = [
    `KeyAuth measured ${peer.at}${peer.quick ? ' (a quick run)' : ''} on ${peer.machine}${peer.setup ? ` (${peer.setup})` : ''}, same generator.`,
    '',
    '| Workload (1 Keywarden worker) | Keywarden req/s | Keywarden CPU ms per 1k | KeyAuth req/s | KeyAuth CPU ms per 1k | req/s ratio | CPU ratio |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const [ours, theirs, what] of pairs) {
    const a = rows.find((r) => r.id === ours);
    const b = peer.rows.find((r) => r.id === theirs);
    lines.push(
      `| ${what} | ${fmt(a?.rps)} | ${fmt(a?.cpu_ms_per_1k, 1)} | ${fmt(b?.rps)} | ${fmt(b?.cpu_ms_per_1k, 1)} | ${a?.rps && b?.rps ? `${(a.rps / b.rps).toFixed(1)} x` : ''} | ${a?.cpu_ms_per_1k && b?.cpu_ms_per_1k ? `${(b.cpu_ms_per_1k / a.cpu_ms_per_1k).toFixed(1)} x less` : ''} |`,
    );
  }
  const notes = peer.rows.map(
    (r) =>
      `- KeyAuth ${r.workload}: cores in use ${coresText(r.cores)}; generator ${fmt(r.gen_cores, 2)}${r.note ? `; ${r.note}` : ''}`,
  );
  return [...lines, '', ...notes].join('\n');
}

function report(): void {
  if (rows.length === 0) return;
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const v = verdicts();
  const json = {
    at: new Date().toISOString(),
    quick,
    duration_s: DURATION_S,
    warmup_s: WARMUP_S,
    connections: CONNS,
    generator_threads: GEN_THREADS,
    machine: machine(),
    rows,
    verdicts: v,
  };
  const side = sideBySide();
  const md = [
    `Run ${json.at} (${quick ? 'quick' : 'full'}: ${DURATION_S} s measured after ${WARMUP_S} s of warm-up per workload, ${CONNS} connections on ${GEN_THREADS} generator threads) on ${machine()}.`,
    '',
    rowsTable(rows),
    '',
    '| Group | Target (groups 1-5: the server; 6: the realtime channel; 7: the hot path) | Measured | Verdict |',
    '|---|---|---|---|',
    ...v.map((x) => `| ${x.group} | ${x.target} | ${x.measured} | ${x.verdict} |`),
    ...(side ? ['', side] : []),
  ].join('\n');
  const bars = rows.filter((r) => r.rps !== undefined && r.ratio !== undefined);
  const max = Math.max(1, ...bars.map((r) => r.rps!));
  const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="820" height="${40 + bars.length * 28}" font-family="sans-serif" font-size="12">`,
    `<text x="10" y="20" font-weight="bold">Keywarden throughput (req/s, ratio to the bare uWS ceiling)</text>`,
    ...bars.map((r, i) => {
      const y = 32 + i * 28;
      const w = Math.max(2, (r.rps! / max) * 380);
      return `<text x="10" y="${y + 14}">${esc(r.workload)}</text><rect x="360" y="${y}" width="${w}" height="18" fill="#4c78a8"/><text x="${366 + w}" y="${y + 14}">${fmt(r.rps)} (${r.ratio!.toFixed(2)})</text>`;
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
  const invalid = rows.filter((r) => r.note?.includes('INVALID'));
  if (invalid.length > 0) {
    progress(
      `${invalid.length} row(s) INVALID (non-2xx answers, socket errors or expired sessions): ${invalid.map((r) => r.id).join(', ')}`,
    );
    process.exitCode = 3;
  }
}

// Interrupted: stop what was started (servers, generators, Redis, PostgreSQL) before leaving.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    progress(`${sig}: stopping what the bench started`);
    void (async () => {
      for (const c of cleanups.reverse()) await c();
      process.exit(130);
    })();
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
