// `npx tsx bench/memory-live.ts [--n=20000] [--channel] [--snapshot [--keep]] [--max-live=1000] [--keys=64] [--redis]`
// Where the memory of live heartbeat sessions goes (target: at most 2 KB a session). Starts one
// Keywarden server in this process (no Redis; re-executed with --expose-gc), creates N live
// heartbeat sessions through the real HTTP API with the bench's generator (`kwload --mode setup`:
// init -> license -> heartbeat/start per session, one client address each, as `npm run bench --
// --memory=N` does), and reads memory after forced collections: RSS, V8 heap used and committed,
// external memory (ArrayBuffer backing stores, Buffers). Then it takes the sessions' parts away one
// at a time (audit entries still queued, live actors, passivated contexts, client-session records)
// with collections after each, so each part's heap and external bytes are measured, not estimated;
// what remains (the per-address limiters, caches) is the last row.
// --snapshot also writes a heap snapshot before and after the sessions and prints the difference
// by constructor (bytes per session), the finest breakdown V8 gives.
// --redis runs the server on Redis (REDIS_URL, default the local one) as a cluster's worker does (the
// records then live in Redis, not in this process); --keys sets how many keys the sessions share.
// --channel makes each session a client connected to the realtime channel (`kwload --mode ws-hold`:
// init -> license -> upgrade -> heartbeat/start on the channel), held open while memory is read;
// the first part taken away is then the connections (closed by the clients).
//
// The generator is another process; in this one there is only the server and this script's
// few objects, so the differences are the server's.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { fileURLToPath } from 'node:url';
import { withMallocDefaults } from '../src/supervisor.js';

const self = fileURLToPath(import.meta.url);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  // Run again with a collector we can call (and room for the snapshot parse).
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '--max-old-space-size=8192', '--import', 'tsx', self, ...process.argv.slice(2)],
    // As `npm start` runs it (glibc malloc settings included).
    { stdio: 'inherit', env: withMallocDefaults(process.env) },
  );
  process.exit(r.status ?? 1);
}

const { loadConfig } = await import('../src/config.js');
const { createLogger } = await import('../src/logger.js');
const { startServer } = await import('../src/main.js');
const { kwload, kwhold, freePort, freshDatabase } = await import('./lib.js');

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const N = Number(arg('n', '20000'));
const MAX_LIVE = arg('max-live', '1000');
const SNAPSHOT = process.argv.includes('--snapshot');
const CHANNEL = process.argv.includes('--channel');
const KEEP = process.argv.includes('--keep');
/** --redis: the server coordinates through Redis (REDIS_URL, default the local one), as a cluster's worker does. */
const REDIS = process.argv.includes('--redis');
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const OWNER = { username: 'benchowner', password: 'bench-pass-1' };
const HWID = 'bench-hwid-000000000000001';
const KEYS = Number(arg('keys', '64'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sample {
  rss: number;
  heapUsed: number;
  heapCommitted: number;
  external: number;
  arrayBuffers: number;
}

/** Full collections until the heap stops shrinking, then a sample (RSS read once it settles). */
async function settled(): Promise<Sample> {
  let last = Infinity;
  for (let i = 0; i < 6; i++) {
    gc!();
    await sleep(100);
    const used = process.memoryUsage().heapUsed;
    if (Math.abs(last - used) < 64 * 1024) break;
    last = used;
  }
  let rss = process.memoryUsage.rss();
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const next = process.memoryUsage.rss();
    if (Math.abs(next - rss) < rss * 0.002) break;
    rss = next;
  }
  const m = process.memoryUsage();
  const h = v8.getHeapStatistics();
  return {
    rss,
    heapUsed: m.heapUsed,
    heapCommitted: h.total_physical_size,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  };
}

async function post(base: string, p: string, body: unknown, token?: string, method = 'POST'): Promise<any> {
  const res = await fetch(base + p, {
    method,
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

// ---- heap snapshot: self size by (node type, constructor) ---------------------------------------

type Agg = Map<string, { count: number; bytes: number }>;

function aggregate(file: string): Agg {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const F = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const out: Agg = new Map();
  for (let i = 0; i < snap.nodes.length; i += F) {
    const type = types[snap.nodes[i + iType]!]!;
    let name = type === 'object' || type === 'native' || type === 'hidden' ? snap.strings[snap.nodes[i + iName]!]! : '';
    if (type === 'hidden' && name.startsWith('system / ')) name = name.replace(/ \/ .*$/, '');
    if (name.length > 60) name = `${name.slice(0, 57)}...`;
    const key = `${type}${name ? `: ${name}` : ''}`;
    const e = out.get(key) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += snap.nodes[i + iSize]!;
    out.set(key, e);
  }
  return out;
}

// ---- the run --------------------------------------------------------------------------------------

const db = await freshDatabase(ADMIN_URL, `kwbench_live_${process.pid}`);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-live-'));
const port = await freePort();
const config = loadConfig(
  {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: db.url,
    REDIS_URL: REDIS ? (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379') : '',
    REDIS_PREFIX: `kwbenchlive${process.pid}:`,
    LOG_LEVEL: 'warn',
    TRUSTED_PROXIES: '127.0.0.1',
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
    HEARTBEAT_MAX_LIVE_ACTORS: MAX_LIVE,
  },
  process.cwd(),
);
const server = await startServer(config, { log: createLogger({ logLevel: 'warn' }) });
const base = `http://127.0.0.1:${server.port}`;
const snapFiles: string[] = [];
try {
  const { token } = await post(base, '/api/auth/login', OWNER);
  const app = await post(base, '/api/apps', { name: 'Live memory bench' }, token);
  await post(base, `/api/apps/${app.id}`, { heartbeat_interval: 300 }, token, 'PATCH');
  const keys = (await post(base, `/api/apps/${app.id}/licenses`, { amount: KEYS, unit: 'lifetime' }, token)) as {
    key: string;
  }[];
  const licenses = keys.map((k) => k.key).join(',');
  let hold: ReturnType<typeof kwhold> | undefined;
  const setup = async (total: number, ipBase: number) => {
    const common = ['--port', String(server.port), '--threads', '2', '--api-key', app.api_key, '--license', licenses,
      '--hwid', HWID, '--ip-base', String(ipBase), '--quiet']; // prettier-ignore
    if (!CHANNEL) return kwload(['--mode', 'setup', '--total', String(total), '--conns', '64', ...common]);
    hold = kwhold(['--conns', String(total), '--prep-window', '64', '--prep-timeout', '3600', ...common]);
    await hold.ready;
    return { ok: total };
  };
  // Warm-up (JIT, pools, the license actors, the audit writer) from addresses outside the measured ones.
  await setup(2_000, 15 << 20);
  await hold?.stop();
  await server.services.audit.repository.flush();
  // Only the JIT and the pools stay from the warm-up: its sessions go, so each part below is the measured ones'.
  const hb = server.app.domain.heartbeat.owner;
  const coordinator = server.services.coordinator as unknown as { store?: Map<string, unknown> };
  const dropRecords = () => {
    for (const key of [...(coordinator.store?.keys() ?? [])])
      if (key.startsWith('sess:')) coordinator.store!.delete(key);
  };
  for (const c of hb.host.contexts()) hb.host.remove(c.session);
  dropRecords();
  await sleep(1_500);
  const before = await settled();
  if (SNAPSHOT) snapFiles.push(v8.writeHeapSnapshot(path.join(dataDir, 'before.heapsnapshot')));
  const t0 = performance.now();
  const k = await setup(N, 1 << 20);
  const seconds = (performance.now() - t0) / 1000;
  await sleep(1_500); // the audit writer and key touches flush
  const after = await settled();
  const sessions = hb.host.size;
  const made = k.ok;
  const per = (a: number, b: number) => Math.round((a - b) / made);
  const line = (name: string, a: Sample, b: Sample) =>
    `| ${name} | ${per(a.heapUsed, b.heapUsed)} | ${per(a.external, b.external)} | ` +
    `${per(a.heapCommitted, b.heapCommitted)} | ${per(a.rss, b.rss)} |`;
  const mib = (b: number) => (b / 2 ** 20).toFixed(0);
  console.log(
    `\n${made.toLocaleString('en-US')} sessions made in ${seconds.toFixed(0)} s ` +
      `(${sessions.toLocaleString('en-US')} hosted, ${hb.host.unpacked} unpacked); ` +
      `RSS ${mib(before.rss)} -> ${mib(after.rss)} MiB\n`,
  );
  console.log('| bytes per session | heap used | external | heap committed | RSS |');
  console.log('|---|---:|---:|---:|---:|');
  console.log(line('all of it', after, before));

  if (SNAPSHOT) snapFiles.push(v8.writeHeapSnapshot(path.join(dataDir, 'after.heapsnapshot')));

  // Take the parts away one at a time; what each frees is its share.
  let auditMs = 0;
  const parts: [string, () => void | Promise<void>][] = [
    ...(CHANNEL
      ? [
          ['channel connections (closed by the clients)', async () => void (await hold!.stop())] as [
            string,
            () => Promise<void>,
          ],
        ]
      : []),
    [
      'audit log entries not yet written (write-behind backlog)',
      async () => {
        const t = performance.now();
        await server.services.audit.repository.flush();
        auditMs = performance.now() - t;
      },
    ],
    [
      `${hb.host.unpacked.toLocaleString('en-US')} unpacked contexts (a fixed cost; packed here)`,
      () => {
        // contexts() lists the unpacked ones first; restore() packs a session.
        for (const c of hb.host.contexts().slice(0, hb.host.unpacked)) hb.host.restore({ ...c });
      },
    ],
    ['heartbeat contexts (passivated)', () => hb.host.close()],
    ['client-session records (coordinator)', dropRecords],
  ];
  let prev = await settled();
  for (const [name, drop] of parts) {
    await drop();
    const now = await settled();
    console.log(line(`- ${name}`, prev, now));
    prev = now;
  }
  console.log(line('= the rest (limiters, caches, allocator)', prev, before));
  console.log(`(the audit writer needed ${(auditMs / 1000).toFixed(1)} s more to catch up after the last session)`);
  const slack = (m: Sample) => m.heapCommitted - m.heapUsed;
  console.log(`\nV8 heap committed but not in use: ${per(slack(after), slack(before))} B/session`);
  if (SNAPSHOT) console.log('(heap snapshots were taken: the committed and RSS columns count them too)');

  if (SNAPSHOT) {
    const [a, b] = [aggregate(snapFiles[0]!), aggregate(snapFiles[1]!)];
    const rows = [...b].map(([key, v]) => {
      const w = a.get(key) ?? { count: 0, bytes: 0 };
      return { key, count: (v.count - w.count) / made, bytes: (v.bytes - w.bytes) / made };
    });
    rows.sort((x, y) => y.bytes - x.bytes);
    console.log('\n| heap snapshot, by constructor | objects per session | bytes per session |');
    console.log('|---|---:|---:|');
    for (const r of rows.slice(0, 30)) console.log(`| ${r.key} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`);
    const total = rows.reduce((s, r) => s + r.bytes, 0);
    console.log(`| total (self sizes) | | ${total.toFixed(0)} |`);
  }
} finally {
  await server.shutdown();
  if (KEEP) console.log(`heap snapshots kept: ${snapFiles.join(' ')}`);
  else fs.rmSync(dataDir, { recursive: true, force: true });
  await db.drop();
}
