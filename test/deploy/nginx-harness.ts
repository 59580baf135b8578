// The real nginx from Debian in front of a test server: the committed deploy/nginx/keywarden.conf,
// templated only where a test must differ (ports, certificate, upstream HTTP version), wrapped in
// a minimal nginx.conf whose pid, logs and temp files live in a temporary directory.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../helpers/process.js';

export { freePort };

export const NGINX = '/usr/sbin/nginx';
const SITE = path.resolve(import.meta.dirname, '../../deploy/nginx/keywarden.conf');

export function nginxAvailable(): boolean {
  return fs.existsSync(NGINX) && spawnSync(NGINX, ['-v']).status === 0;
}

export function opensslAvailable(): boolean {
  return spawnSync('openssl', ['version']).status === 0;
}

/** A self-signed certificate for 127.0.0.1, valid one day. */
export function selfSignedCert(dir: string): { cert: string; key: string; pem: string } {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
  return { cert, key, pem: fs.readFileSync(cert, 'utf8') };
}

export interface SiteOptions {
  upstreamPort: number | string;
  /** More workers in the round robin (their shared ports on 127.0.0.1, or `host:port`). */
  moreUpstreams?: (number | string)[];
  /**
   * Affinity: one map line and one upstream per worker (`address`: its own port; ports on 127.0.0.1
   * or `host:port`), written as the committed file's commented example says: a backup line there on
   * the worker's own host becomes `hosts[host]`, one on another host becomes every other host's.
   */
  routes?: { route: string; address: number | string; host: string }[];
  /** With routes: each host's shared port(s), by the name the routes use. */
  hosts?: Record<string, (number | string)[]>;
  tlsPort: number;
  httpPort: number;
  cert: string;
  key: string;
  /** proxy_http_version; the committed file says 1.1. */
  httpVersion?: '1.0' | '1.1';
  /** Replaces the committed proxy_read_timeout (60s) for the non-streaming locations. */
  readTimeout?: string;
}

const hostPort = (a: number | string) => (typeof a === 'number' ? `127.0.0.1:${a}` : a);

/** deploy/nginx/keywarden.conf with each test-specific line replaced; every edit must match exactly. */
export function renderSite(o: SiteOptions): string {
  let text = fs.readFileSync(SITE, 'utf8');
  const edit = (from: string | RegExp, to: string, times = 1) => {
    const count =
      typeof from === 'string' ? text.split(from).length - 1 : (text.match(new RegExp(from, 'g')) ?? []).length;
    if (count !== times)
      throw new Error(`deploy/nginx/keywarden.conf changed: expected ${times} × ${String(from)}, found ${count}`);
    text = typeof from === 'string' ? text.split(from).join(to) : text.replace(new RegExp(from, 'g'), to);
  };
  edit(
    'server 127.0.0.1:8080 max_fails=3 fail_timeout=5s;',
    [o.upstreamPort, ...(o.moreUpstreams ?? [])]
      .map((p) => `server ${hostPort(p)} max_fails=3 fail_timeout=5s;`)
      .join('\n    '),
  );
  if (o.routes) {
    const name = (route: string) => `keywarden_${route.replace(/[^A-Za-z0-9_]/g, '_')}`;
    edit(
      '    #   a-0 keywarden_a_0;\n    #   a-1 keywarden_a_1;\n',
      o.routes.map((r) => `    ${r.route} ${name(r.route)};\n`).join(''),
    );
    const example = upstreamExample(text);
    const hosts = o.hosts ?? {};
    text += o.routes
      .map((r) => {
        const backups = example.backups.flatMap((b) =>
          (b.sameHost ? [r.host] : Object.keys(hosts).filter((h) => h !== r.host)).flatMap((h) =>
            (hosts[h] ?? []).map((a) => b.line.replace(EXAMPLE_ADDRESS, hostPort(a))),
          ),
        );
        return [
          '',
          `upstream ${name(r.route)} {`,
          example.primary.replace(EXAMPLE_ADDRESS, hostPort(r.address)),
          ...backups,
          ...example.rest,
          '}',
          '',
        ].join('\n');
      })
      .join('');
  }
  edit('listen 80;', `listen 127.0.0.1:${o.httpPort};`);
  edit('listen [::]:80;\n', '');
  edit('listen 443 ssl http2;', `listen 127.0.0.1:${o.tlsPort} ssl http2;`);
  edit('listen [::]:443 ssl http2;\n', '');
  edit(/ssl_certificate +\S+;/, `ssl_certificate ${o.cert};`);
  edit(/ssl_certificate_key +\S+;/, `ssl_certificate_key ${o.key};`);
  if (o.httpVersion && o.httpVersion !== '1.1') edit('proxy_http_version 1.1;', `proxy_http_version ${o.httpVersion};`);
  if (o.readTimeout) edit('proxy_read_timeout    60s;', `proxy_read_timeout ${o.readTimeout};`);
  return text;
}

const EXAMPLE_ADDRESS = /10\.0\.0\.\d+:\d+/;

/**
 * The committed file's commented per-worker upstream (`#   upstream keywarden_a_0 { ... }`): its
 * primary `server` line, its `backup` lines (each on the primary's host or on another one), and the rest.
 */
function upstreamExample(text: string): {
  primary: string;
  backups: { line: string; sameHost: boolean }[];
  rest: string[];
} {
  const m = /^# {3}upstream keywarden_a_0 \{\n((?:# {3} {4}.*\n)+)# {3}\}$/m.exec(text);
  if (!m) throw new Error('deploy/nginx/keywarden.conf changed: no commented upstream keywarden_a_0 example');
  const lines = m[1]!
    .trimEnd()
    .split('\n')
    .map((l) => l.slice(4));
  const servers = lines.filter((l) => /^\s*server /.test(l));
  const primary = servers.filter((l) => !/ backup;$/.test(l));
  if (primary.length !== 1) throw new Error('deploy/nginx/keywarden.conf: the example upstream needs one primary');
  const ip = (l: string) => EXAMPLE_ADDRESS.exec(l)?.[0].split(':')[0];
  return {
    primary: primary[0]!,
    backups: servers
      .filter((l) => / backup;$/.test(l))
      .map((line) => ({ line, sameHost: ip(line) === ip(primary[0]!) })),
    rest: lines.filter((l) => !/^\s*server /.test(l)),
  };
}

export interface Nginx {
  dir: string;
  errorLog(): string;
  /**
   * Replaces the site and reloads (SIGHUP): new workers take the new configuration, the old ones end
   * once their requests are answered. Resolves once `nginx -t` accepted it and the old workers had time
   * to go (nginx announces neither).
   */
  reload(site: string): Promise<void>;
  stop(): Promise<void>;
}

async function waitForPort(port: number, child: ChildProcess, dir: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`nginx exited (${child.exitCode}):\n${fs.readFileSync(path.join(dir, 'error.log'), 'utf8')}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nginx did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50)); // nginx announces nothing when ready: poll its port
  }
}

/** Runs nginx in the foreground (a child of this process) with `site` as its only server config. */
export async function startNginx(site: string, tlsPort: number): Promise<Nginx> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-nginx-'));
  fs.writeFileSync(path.join(dir, 'keywarden.conf'), site);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((t) => `${t}_temp_path ${path.join(dir, t)};`)
    .join('\n  ');
  fs.writeFileSync(
    path.join(dir, 'nginx.conf'),
    `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes 1;
pid ${path.join(dir, 'nginx.pid')};
error_log ${path.join(dir, 'error.log')} warn;
events { worker_connections 256; }
http {
  access_log ${path.join(dir, 'access.log')};
  ${temp}
  include ${path.join(dir, 'keywarden.conf')};
}
`,
  );
  const args = ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')];
  const check = spawnSync(NGINX, [...args, '-t'], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`nginx -t refused the configuration:\n${check.stderr}`);
  const child = spawn(NGINX, [...args, '-g', 'daemon off;'], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await waitForPort(tlsPort, child, dir);
  return {
    dir,
    errorLog: () => fs.readFileSync(path.join(dir, 'error.log'), 'utf8'),
    async reload(next: string) {
      fs.writeFileSync(path.join(dir, 'keywarden.conf'), next);
      const t = spawnSync(NGINX, [...args, '-t'], { encoding: 'utf8' });
      if (t.status !== 0) throw new Error(`nginx -t refused the configuration:\n${t.stderr}`);
      child.kill('SIGHUP');
      await new Promise((r) => setTimeout(r, 2_000));
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT'); // graceful: workers finish first
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A fetch for one https origin that trusts `ca` and connects from `localAddress` (another
 * loopback address than nginx's, so the client's address differs from the proxy's); other
 * origins go to the real fetch. Installed as globalThis.fetch for the test helpers' clients.
 */
export function originFetch(origin: string, ca: string, localAddress: string, fallback: typeof fetch): typeof fetch {
  const agent = new https.Agent({ keepAlive: true, ca, localAddress });
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    if (url.origin !== origin) return fallback(input, init);
    const raw = init?.body;
    const body = raw == null ? undefined : typeof raw === 'string' ? Buffer.from(raw) : Buffer.from(raw as Uint8Array);
    const headers = Object.fromEntries(new Headers(init?.headers));
    return new Promise<Response>((resolve, reject) => {
      const req = https.request(url, { method: init?.method ?? 'GET', headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('error', reject);
        res.once('end', () => {
          const h = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          const status = res.statusCode ?? 0;
          resolve(
            new Response([204, 205, 304].includes(status) ? null : Buffer.concat(chunks), {
              status,
              statusText: res.statusMessage ?? '',
              headers: h,
            }),
          );
        });
      });
      req.once('error', reject);
      req.end(body);
    });
  }) as typeof fetch;
}
