// Two rows of releases and updates (docs/releases.md), run by bench/run.ts (`--only=download,upgrade`):
//
// - download: a 256 MiB artifact fetched by 16 concurrent clients (curl, to /dev/null) through a
//   download link, against nginx serving the same file from the same disk with sendfile, in the same
//   run on the same machine: throughput of each and their ratio (target >= 0.7), and the server's
//   RSS sampled over the run (it must stay flat: files stream, they are never held).
// - upgrade: the upgrade check's server CPU per call against a license re-activation's, both driven
//   the same way (16 concurrent Node clients, keep-alive) on the same server, so only the server's
//   work differs.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { cpuDelta, descendants, freePort, procTable, progress, rssBytes, type Row } from './lib.js';

const MIB = 1024 * 1024;
const CLIENTS = 16;

interface Target {
  base: string;
  pid: number;
  /** A signed-in dashboard token of the owner. */
  token: string;
}

let seq = 0;
/** A fresh client address per call (the server trusts loopback as a proxy): no call meets a rate limit. */
const nextIp = () => `10.${(++seq >> 16) & 255}.${(seq >> 8) & 255}.${seq & 255}`;

async function call(base: string, method: string, p: string, body: unknown, token?: string): Promise<any> {
  const res = await fetch(base + p, {
    method,
    headers: {
      'x-forwarded-for': nextIp(),
      ...(body instanceof Buffer ? {} : { 'content-type': 'application/json' }),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: body instanceof Buffer ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p} -> ${res.status} ${text}`);
  return JSON.parse(text);
}

/** An app with a published release holding `file`, and an activated session on a lifetime key. */
async function releaseFixture(t: Target, file: string) {
  const app = await call(t.base, 'POST', '/api/apps', { name: `Bench releases ${Date.now()}` }, t.token);
  const keys = await call(t.base, 'POST', `/api/apps/${app.id}/licenses`, { amount: 1, unit: 'lifetime' }, t.token);
  const rel = await call(t.base, 'POST', `/api/apps/${app.id}/releases`, { version: '2.0.0' }, t.token);
  const res = await fetch(`${t.base}/api/releases/${rel.id}/artifacts/app.bin`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${t.token}`, 'content-length': String(fs.statSync(file).size) },
    body: fs.createReadStream(file) as unknown as BodyInit,
    duplex: 'half',
  } as RequestInit);
  if (res.status !== 201) throw new Error(`upload -> ${res.status} ${await res.text()}`);
  const artifact = (await res.json()) as { id: string };
  await call(t.base, 'POST', `/api/releases/${rel.id}/publish`, {}, t.token);
  const session = (await call(t.base, 'POST', '/api/client/init', { api_key: app.api_key })).session as string;
  await call(t.base, 'POST', '/api/client/license', { session, license: keys[0].key, hwid: 'bench-release-hwid-0001' });
  return { session, license: keys[0].key as string, artifactId: artifact.id };
}

/** Runs `n` curl downloads of `url` at once; bytes per second over the whole batch. */
async function curlBatch(url: string, n: number, size: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve, reject) => {
          const c = spawn('curl', ['-sf', '-o', '/dev/null', '-w', '%{size_download}', url]);
          let out = '';
          c.stdout.on('data', (d: Buffer) => (out += d.toString()));
          c.once('exit', (code) =>
            code === 0 && Number(out) === size ? resolve() : reject(new Error(`curl ${code} got ${out} of ${size}`)),
          );
        }),
    ),
  );
  return (n * size) / (Number(process.hrtime.bigint() - t0) / 1e9);
}

async function startNginx(dir: string, file: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const conf = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    conf,
    `daemon off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/nginx-error.log warn;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path ${dir}/nginx-body; proxy_temp_path ${dir}/nginx-proxy; fastcgi_temp_path ${dir}/nginx-fcgi;
  uwsgi_temp_path ${dir}/nginx-uwsgi; scgi_temp_path ${dir}/nginx-scgi;
  server { listen 127.0.0.1:${port}; location = /app.bin { alias ${file}; } } }
`,
  );
  const child = spawn('nginx', ['-c', conf, '-p', dir], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/app.bin`, { method: 'HEAD' })).status === 200) return { port, child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`nginx did not start (see ${dir}/nginx-error.log)`);
}

/** Server CPU seconds per 1,000 calls of `once`, run by CLIENTS concurrent loops for `seconds`. */
async function cpuPerThousand(pid: number, seconds: number, once: () => Promise<void>): Promise<[number, number]> {
  const group = (table: ReturnType<typeof procTable>) => descendants(table, pid);
  const before = procTable();
  const members = group(before);
  const end = Date.now() + seconds * 1000;
  let calls = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < end) {
        await once();
        calls++;
      }
    }),
  );
  const cpu = cpuDelta(before, procTable(), (p) => (members.has(p.pid) ? 'server' : null)).server ?? 0;
  return [(cpu * 1e6) / calls, calls / seconds];
}

export async function releaseRows(t: Target, opts: { dir: string; quick: boolean; want: (id: string) => boolean }) {
  const rows: Row[] = [];
  const size = (opts.quick ? 64 : 256) * MIB;
  const file = path.join(opts.dir, 'artifact.bin');
  const out = fs.openSync(file, 'w');
  const block = randomBytes(MIB);
  for (let i = 0; i < size / MIB; i++) fs.writeSync(out, block);
  fs.closeSync(out);
  // nginx's worker runs as an unprivileged user: the folder (made 0700) and the file must be readable.
  fs.chmodSync(opts.dir, 0o755);
  fs.chmodSync(file, 0o644);
  const f = await releaseFixture(t, file);
  const offer = async () => {
    const r = await call(t.base, 'POST', '/api/client/releases/upgrade', { session: f.session, version: '1.0.0' });
    return r.upgrade.artifacts[0].url as string;
  };

  if (opts.want('download')) {
    progress(`(r) download of a ${size / MIB} MiB artifact, ${CLIENTS} clients, vs nginx sendfile`);
    const nginx = await startNginx(opts.dir, file);
    try {
      const url = await offer();
      await curlBatch(url, 2, size); // warm the page cache and the server
      const rss: number[] = [rssBytes(t.pid)];
      const sampler = setInterval(() => rss.push(rssBytes(t.pid)), 200);
      const ours = await curlBatch(url, CLIENTS, size);
      clearInterval(sampler);
      rss.push(rssBytes(t.pid));
      const theirs = await curlBatch(`http://127.0.0.1:${nginx.port}/app.bin`, CLIENTS, size);
      const ratio = ours / theirs;
      rows.push({
        id: 'download',
        workload: `(r) download of a ${size / MIB} MiB artifact, ${CLIENTS} concurrent clients, vs nginx sendfile`,
        value: Math.round(ours / MIB),
        unit: 'MiB/s',
        ratio,
        note:
          `nginx ${Math.round(theirs / MIB)} MiB/s; ratio ${ratio.toFixed(2)} (target >= 0.7); server RSS ` +
          `${Math.round(rss[0]! / MIB)} MiB at the start, max ${Math.round(Math.max(...rss) / MIB)} MiB, ` +
          `${Math.round(rss.at(-1)! / MIB)} MiB at the end (${rss.length} samples)`,
      });
    } finally {
      nginx.child.kill('SIGTERM');
    }
  }

  if (opts.want('upgrade')) {
    progress('(r) upgrade check vs license re-activation: server CPU per call');
    const seconds = opts.quick ? 5 : 15;
    const [upgrade, upgradeRps] = await cpuPerThousand(t.pid, seconds, async () => void (await offer()));
    const [license, licenseRps] = await cpuPerThousand(t.pid, seconds, async () => {
      await call(t.base, 'POST', '/api/client/license', {
        session: f.session,
        license: f.license,
        hwid: 'bench-release-hwid-0001',
      });
    });
    rows.push({
      id: 'upgrade',
      workload: '(r) upgrade check, server CPU per call, vs license re-activation on the same session',
      cpu_ms_per_1k: upgrade,
      rps: upgradeRps,
      ratio: upgrade / license,
      note: `license re-activation ${license.toFixed(0)} ms per 1k (${licenseRps.toFixed(0)}/s); ratio ${(
        upgrade / license
      ).toFixed(2)} (target <= 1)`,
    });
  }
  fs.rmSync(file, { force: true });
  return rows;
}
