// Shared by bench/run.ts (Keywarden) and bench/peer/keyauth.ts (the side-by-side): the native
// load generator (bench/gen/kwload.c), CPU time of process groups read from /proc, Prometheus
// text parsing, and the result rows and their table.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ensureServerBuild } from '../scripts/build.mjs';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, '..');
const t0 = Date.now();

export function progress(msg: string): void {
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${msg}\n`);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** A new empty database `name` beside `adminUrl`'s (an old one of that name is dropped first). */
export async function freshDatabase(
  adminUrl: string,
  name: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`drop database if exists "${name}" with (force)`);
  await admin(`create database "${name}"`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => admin(`drop database if exists "${name}" with (force)`) };
}

export function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} x ${cpus[0]?.model.trim() ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}, node ${process.version}`;
}

// ---- the generator ------------------------------------------------------------------------------

/** Whether the generator can speak the realtime channel (it needs libsodium's header and library). */
export const channelCapable = (): boolean => fs.existsSync('/usr/include/sodium.h');

/** Whether the generator can speak TLS (`keywarden loadtest --url https://...`): OpenSSL's headers (libssl-dev). */
export const tlsCapable = (): boolean => fs.existsSync('/usr/include/openssl/ssl.h');

/**
 * Compiles bench/gen/kwload.c (with the headers beside it) into bench/.build/ (git-ignored) when the
 * binary is missing or older than any of them; with libsodium (apt-get install libsodium-dev) it has
 * the channel modes, request signing and answer verification too, with OpenSSL (libssl-dev) TLS.
 */
export function buildKwload(): string {
  const dir = path.join(here, 'gen');
  const src = path.join(dir, 'kwload.c');
  const ws = channelCapable();
  const tls = tlsCapable();
  const out = path.join(here, '.build', `kwload${ws ? '-ws' : ''}${tls ? '-tls' : ''}`);
  const newest = Math.max(...fs.readdirSync(dir).map((f) => fs.statSync(path.join(dir, f)).mtimeMs));
  if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= newest) return out;
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const cc = process.env.CC ?? 'cc';
  const libs = [...(ws ? ['-lsodium'] : []), ...(tls ? ['-lssl', '-lcrypto'] : [])];
  // Built beside its final name and renamed: two runs building at once never execute a half-written file.
  const tmp = `${out}.${process.pid}.tmp`;
  const r = spawnSync(cc, ['-O2', '-pthread', '-Wall', '-o', tmp, src, ...libs], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(
      `${cc} could not build the load generator (apt-get install gcc): ${r.error?.message ?? ''}${r.stderr}`,
    );
  fs.renameSync(tmp, out);
  return out;
}

/**
 * The service and the ceiling as production runs them: compiled by tsc, no TypeScript loader (a
 * loader's transform adds work to every closure a request creates, which would be measured too).
 * The service's dist/ is built by scripts/build.mjs when stale (as `npm start` does); the ceiling,
 * with the src/ modules it imports, into bench/.build/ceiling/. Returns both entry points.
 */
export async function compiledEntryPoints(): Promise<{ server: string; ceiling: string }> {
  const server = await ensureServerBuild({ root, log: progress });
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(here, 'tsconfig.ceiling.json')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc could not compile the ceiling server: ${r.stdout}${r.stderr}`);
  return { server, ceiling: path.join(here, '.build', 'ceiling', 'bench', 'ceiling-server.js') };
}

/** The generator's result line (see bench/gen/kwload.c). Latencies in microseconds. */
export interface KwResult {
  mode: string;
  conns: number;
  threads: number;
  rate: number;
  duration_s: number;
  requests: number;
  ok: number;
  non2xx: number;
  /** 503 answers (load shed) */
  shed: number;
  /** 429 answers (a per-address limit) */
  limited: number;
  errors: number;
  reconnects: number;
  prep_fail: number;
  bad_body: number;
  dead_conns: number;
  rps: number;
  ok_rps: number;
  prep_s: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  p999_us: number;
  max_us: number;
  mean_us: number;
  cpu_window_s: number;
  cpu_total_s: number;
  /** ws-hold: pushed messages received */
  events?: number;
  /** channel connections the server closed */
  ws_closed?: number;
}

export interface WindowHooks {
  /** Called when the measured window opens and closes (after the warm-up), to sample the server. */
  onStart?: () => void;
  onEnd?: () => void;
}

interface Started {
  child: ChildProcess;
  stderr: string;
  result?: KwResult;
}

/** Starts the generator: stderr passes through (and is kept), each stdout line but the result goes to `onLine`. */
function startKwload(args: string[], stdin: 'ignore' | 'pipe', onLine: (line: string) => void): Started {
  const child = spawn(buildKwload(), args, { stdio: [stdin, 'pipe', 'pipe'] });
  const s: Started = { child, stderr: '' };
  let buf = '';
  child.stderr!.on('data', (d: Buffer) => {
    s.stderr += d.toString();
    process.stderr.write(d);
  });
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.startsWith('KWLOAD {')) s.result = JSON.parse(line.slice(7)) as KwResult;
      else onLine(line);
    }
  });
  return s;
}

/** Runs the generator; `hooks` run synchronously at the window's edges (sample /proc there). */
export function kwload(args: string[], hooks: WindowHooks = {}): Promise<KwResult> {
  return new Promise((resolve, reject) => {
    const s = startKwload(args, 'ignore', (line) => {
      if (line === 'KWLOAD window-start') hooks.onStart?.();
      else if (line === 'KWLOAD window-end') hooks.onEnd?.();
    });
    s.child.once('error', reject);
    s.child.once('exit', (code) => {
      if (code === 0 && s.result) resolve(s.result);
      else reject(new Error(`kwload ${args.join(' ')} failed (exit ${code}): ${s.stderr.slice(-2000)}`));
    });
  });
}

/** A `ws-hold` generator: channels held open, pushes reported as they arrive. */
export interface Hold {
  /** resolves when every connection has its channel and heartbeat session (or could not) */
  ready: Promise<void>;
  /** ws-hold prints `KWLOAD event <type> <connection> <ns>` (CLOCK_MONOTONIC, as process.hrtime) */
  onEvent: (fn: (type: string, conn: number, ns: bigint) => void) => void;
  /** closes the channels and returns the generator's result */
  stop: () => Promise<KwResult>;
}

export function kwhold(args: string[]): Hold {
  const listeners: ((type: string, conn: number, ns: bigint) => void)[] = [];
  let readyFn: () => void = () => {};
  const s = startKwload(['--mode', 'ws-hold', ...args], 'pipe', (line) => {
    if (line.startsWith('KWLOAD ready')) readyFn();
    else if (line.startsWith('KWLOAD event ')) {
      const [type, conn, ns] = line.slice(13).split(' ');
      for (const fn of listeners) fn(type!, Number(conn), BigInt(ns!));
    }
  });
  const exited = new Promise<number | null>((r) => s.child.once('exit', (code) => r(code)));
  const ready = new Promise<void>((resolve, reject) => {
    readyFn = resolve;
    void exited.then((code) =>
      reject(new Error(`kwload ws-hold exited (${code}) before it was ready: ${s.stderr.slice(-2000)}`)),
    );
  });
  return {
    ready,
    onEvent: (fn) => listeners.push(fn),
    stop: async () => {
      s.child.stdin!.end();
      const code = await exited;
      if (code !== 0 || !s.result)
        throw new Error(`kwload ws-hold ${args.join(' ')} failed (exit ${code}): ${s.stderr.slice(-2000)}`);
      return s.result;
    },
  };
}

// ---- CPU time and memory from /proc --------------------------------------------------------------

const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

export interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  /** utime + stime + cutime + cstime, seconds (children's time counts once they are reaped). */
  cpu: number;
}

export function procTable(): Map<number, Proc> {
  const out = new Map<number, Proc>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    const f = stat.slice(close + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    out.set(Number(name), {
      pid: Number(name),
      ppid: Number(f[1]),
      comm: stat.slice(open + 1, close),
      cpu: ticks / TICK,
    });
  }
  return out;
}

export function descendants(table: Map<number, Proc>, rootPid: number): Set<number> {
  const kids = new Map<number, number[]>();
  for (const p of table.values()) {
    const list = kids.get(p.ppid);
    if (list) list.push(p.pid);
    else kids.set(p.ppid, [p.pid]);
  }
  const out = new Set<number>();
  const stack = [rootPid];
  while (stack.length) {
    const pid = stack.pop()!;
    if (out.has(pid) || !table.has(pid)) continue;
    out.add(pid);
    stack.push(...(kids.get(pid) ?? []));
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Names process groups ("workers", "redis", ...) in a /proc snapshot; null = not counted. */
export type Classify = (p: Proc, table: Map<number, Proc>) => string | null;

/** CPU seconds per group between two snapshots (processes born in between count from zero). */
export function cpuDelta(
  before: Map<number, Proc>,
  after: Map<number, Proc>,
  classify: Classify,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of after.values()) {
    const g = classify(p, after);
    if (!g) continue;
    out[g] = (out[g] ?? 0) + p.cpu - (before.get(p.pid)?.cpu ?? 0);
  }
  return out;
}

// ---- Prometheus text -----------------------------------------------------------------------------

/** Every sample by its full series name (`name{labels}`), and each labelled name's sum under `name`. */
export type Metrics = Record<string, number>;

export function parseMetrics(text: string): Metrics {
  const out: Metrics = {};
  const summed = new Set<string>();
  for (const m of text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([-0-9.e+NaInf]+)$/gm)) {
    const v = Number(m[3]);
    if (!m[2]) {
      out[m[1]!] = v;
      continue;
    }
    out[m[1]! + m[2]] = v;
    if (!(m[1]! in out) || summed.has(m[1]!)) {
      out[m[1]!] = (summed.has(m[1]!) ? out[m[1]!]! : 0) + v;
      summed.add(m[1]!);
    }
  }
  return out;
}

export function sumOf(ms: Metrics[], key: string): number {
  return ms.reduce((a, m) => a + (m[key] ?? 0), 0);
}

/** GC between two scrapes (summed over workers) from prom-client's nodejs_gc_duration_seconds. */
export interface GcStats {
  count: number;
  total_ms: number;
  major: number;
  /** the smallest histogram bound every pause stayed under, ms (prom-client buckets: 1, 10, 100 ms, 1, 2, 5 s) */
  max_le_ms?: number;
}

export function gcBetween(before: Metrics[], after: Metrics[], prefix = 'keywarden_'): GcStats {
  const name = `${prefix}nodejs_gc_duration_seconds`;
  const d = (k: string) => sumOf(after, k) - sumOf(before, k);
  const count = d(`${name}_count`);
  const les = new Map<number, number>();
  const majors = { v: 0 };
  for (const m of after) {
    for (const k of Object.keys(m)) {
      const b = /_bucket\{(.*)\}$/.exec(k);
      if (!k.startsWith(`${name}_bucket{`) || !b) continue;
      const le = /le="([^"]+)"/.exec(b[1]!)?.[1];
      if (!le || le === '+Inf') continue;
      les.set(Number(le), les.get(Number(le)) ?? 0);
    }
    for (const k of Object.keys(m)) if (k.startsWith(`${name}_count{`) && /kind="major"/.test(k)) majors.v += m[k]!;
  }
  for (const m of before)
    for (const k of Object.keys(m)) if (k.startsWith(`${name}_count{`) && /kind="major"/.test(k)) majors.v -= m[k]!;
  let maxLe: number | undefined;
  for (const le of [...les.keys()].sort((a, b) => a - b)) {
    const bucket = (ms: Metrics[]) =>
      ms.reduce(
        (a, m) =>
          a +
          Object.entries(m)
            .filter(([k]) => k.startsWith(`${name}_bucket{`) && k.includes(`le="${le}"`))
            .reduce((s, [, v]) => s + v, 0),
        0,
      );
    if (bucket(after) - bucket(before) >= count) {
      maxLe = le * 1000;
      break;
    }
  }
  return { count, total_ms: d(`${name}_sum`) * 1000, major: majors.v, max_le_ms: count > 0 ? maxLe : undefined };
}

// ---- result rows and the table ---------------------------------------------------------------------

export interface Row {
  /** stable id, e.g. "hb1", "init", "latency50-1" */
  id: string;
  workload: string;
  system?: 'keywarden' | 'keyauth';
  rps?: number;
  ratio?: number;
  p50_ms?: number;
  p99_ms?: number;
  p999_ms?: number;
  /** server CPU seconds per 1,000 accepted requests (all server processes) */
  cpu_ms_per_1k?: number;
  /** CPU cores in use over the window, by process group */
  cores?: Record<string, number>;
  gen_cores?: number;
  value?: number;
  unit?: string;
  note?: string;
  gc?: GcStats;
  non2xx?: number;
  errors?: number;
}

export const fmt = (n: number | undefined, d = 0): string =>
  n === undefined || !Number.isFinite(n)
    ? ''
    : n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

export function coresText(c: Record<string, number> | undefined): string {
  if (!c) return '';
  return Object.entries(c)
    .filter(([, v]) => v >= 0.005)
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(', ');
}

export function gcText(g: GcStats | undefined): string {
  if (!g || g.count === 0) return '';
  return `GC ${g.count} pauses (${g.major} major), ${g.total_ms.toFixed(0)} ms${g.max_le_ms !== undefined ? `, each <= ${fmt(g.max_le_ms)} ms` : ''}`;
}

export function rowsTable(rows: Row[]): string {
  const lines = [
    '| Workload | req/s | ratio to (a) | p50 ms | p99 ms | p99.9 ms | server CPU ms per 1k req | cores in use (server; generator) | value | notes |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|---|',
  ];
  for (const r of rows) {
    const cores = r.cores ? `${coresText(r.cores)}; gen ${fmt(r.gen_cores, 2)}` : '';
    const notes = [r.note, gcText(r.gc)].filter(Boolean).join('; ');
    lines.push(
      `| ${r.workload} | ${fmt(r.rps)} | ${r.ratio === undefined ? '' : r.ratio.toFixed(2)} | ${fmt(r.p50_ms, 2)} | ${fmt(r.p99_ms, 2)} | ${fmt(r.p999_ms, 2)} | ${fmt(r.cpu_ms_per_1k, 1)} | ${cores} | ${r.value === undefined ? '' : `${fmt(r.value)} ${r.unit ?? ''}`} | ${notes} |`,
    );
  }
  return lines.join('\n');
}

/** Where a measured row went wrong (non-2xx answers or broken connections): said loudly in its note. */
export function troubles(k: KwResult): string {
  const t: string[] = [];
  if (k.non2xx) t.push(`${k.non2xx} non-2xx`);
  if (k.errors) t.push(`${k.errors} socket errors`);
  if (k.bad_body) t.push(`${k.bad_body} answers without new_token`);
  if (k.dead_conns) t.push(`${k.dead_conns} connections could not prepare a session`);
  if (k.ws_closed) t.push(`${k.ws_closed} channels closed by the server`);
  return t.length ? `**INVALID: ${t.join(', ')}**` : '';
}
