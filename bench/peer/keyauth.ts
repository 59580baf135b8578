// The side-by-side: KeyAuth's open-source server (PHP-FPM, nginx, MariaDB, Redis) under the same
// three client workloads as Keywarden's bench, with the same generator and settings.
//
//   KEYAUTH_DIR=/path/to/KeyAuth-Source-Code npm run bench:keyauth [-- --quick | --duration=15]
//
// Nothing of KeyAuth is in this repository: the user checks it out (github.com/KeyAuth/KeyAuth-Source-Code)
// and points KEYAUTH_DIR at it. This script (run as root on Debian/Ubuntu)
//   1. installs what it needs with apt-get (nginx, php-fpm with mysqli and redis, mariadb-server,
//      redis-server) unless the binaries are already there (--no-install skips the step);
//   2. copies the checkout into a private work directory (the checkout itself is not touched),
//      writes includes/credentials.php, and raises one constant: KeyAuth's hosted per-application
//      limit of 200 API calls a minute (api/1.2/index.php, `rateLimit("KeyAuthAppLimit:"...)`),
//      which would otherwise turn every workload into "too many requests" answers after 200 calls
//      (KEYAUTH_APP_LIMIT=keep leaves it; the answers then count as failures);
//   3. starts private instances on loopback only: MariaDB (own data directory and socket,
//      db_structure.sql imported, one application, one subscription level, 64 license keys),
//      PHP-FPM (a static pool, KEYAUTH_FPM_CHILDREN, default 4 per core) and nginx (a free port).
//      KeyAuth's includes/redis.php connects to 127.0.0.1:6379, so it uses the Redis there (one is
//      started when none answers);
//   4. activates each key once, then runs, each after a warm-up: heartbeat (KeyAuth `check` on a
//      validated session), `init` (a new session each, from its own address) and `license` (an
//      activated key, which KeyAuth verifies with bcrypt on every call);
//   5. writes bench/results/keyauth-<timestamp>.json, which `npm run bench` merges into its
//      side-by-side table, and stops everything it started.
// A KeyAuth answer counts as accepted only when it is HTTP 2xx with "success":true (KeyAuth
// answers 200 to failures).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  buildKwload,
  cmdline,
  cpuDelta,
  descendants,
  fmt,
  freePort,
  here,
  kwload,
  machine,
  procTable,
  progress,
  rowsTable,
  troubles,
  type Classify,
  type Proc,
  type Row,
} from '../lib.js';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const DURATION_S = Number(opt('duration') ?? (quick ? 3 : 15));
const WARMUP_S = quick ? 1 : 2;
const CONNS = Number(opt('conns') ?? 64);
const GEN_THREADS = Number(opt('gen-threads') ?? 2);
const KEYS = 64;
const HWID = 'bench-hwid-000000000000001'; // KeyAuth wants at least 20 characters
const FPM_CHILDREN = Number(process.env.KEYAUTH_FPM_CHILDREN ?? 4 * os.cpus().length);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const children: ChildProcess[] = [];
let work = '';

function sh(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.error?.message ?? ''}${r.stderr}${r.stdout}`);
  return r.stdout;
}

function which(...names: string[]): string | undefined {
  for (const n of names) {
    for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/sbin', '/usr/local/bin', '/sbin']) {
      if (n.includes('*')) {
        if (!fs.existsSync(dir)) continue;
        const re = new RegExp(`^${n.replace(/[.]/g, '\\.').replace('*', '.*')}$`);
        const hit = fs
          .readdirSync(dir)
          .filter((f) => re.test(f))
          .sort()
          .at(-1);
        if (hit) return path.join(dir, hit);
      } else if (fs.existsSync(path.join(dir, n))) return path.join(dir, n);
    }
  }
  return undefined;
}

function daemon(name: string, cmd: string, args: string[]): ChildProcess {
  const log = fs.openSync(path.join(work, `${name}.out`), 'a');
  const child = spawn(cmd, args, { stdio: ['ignore', log, log] });
  children.push(child);
  return child;
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if (await cond()) return;
    } catch {
      // not yet
    }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what} (logs in ${work})`);
}

const redisPing = (port: number) =>
  new Promise<boolean>((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write('PING\r\n'));
    sock.once('data', (d) => {
      sock.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    sock.once('error', () => resolve(false));
  });

async function main(): Promise<void> {
  const src = process.env.KEYAUTH_DIR;
  if (
    !src ||
    !fs.existsSync(path.join(src, 'api/1.2/index.php')) ||
    !fs.existsSync(path.join(src, 'db_structure.sql'))
  ) {
    console.error(
      'KEYAUTH_DIR must point to a checkout of github.com/KeyAuth/KeyAuth-Source-Code (api/1.2/index.php, db_structure.sql)',
    );
    process.exit(2);
  }
  buildKwload();
  const root = process.getuid?.() === 0;

  // 1. packages
  const need = () => ({
    nginx: which('nginx'),
    fpm: which('php-fpm*'),
    mariadbd: which('mariadbd', 'mysqld'),
    redis: which('redis-server'),
  });
  if (!argv.includes('--no-install') && Object.values(need()).some((v) => !v)) {
    if (!root)
      throw new Error(
        'installing packages needs root (or install nginx php-fpm php-mysql php-redis mariadb-server redis-server and pass --no-install)',
      );
    progress('installing nginx, php-fpm, mariadb-server, redis-server (apt-get)');
    sh('apt-get', ['update']);
    spawnSync(
      'apt-get',
      [
        'install',
        '-y',
        '--no-install-recommends',
        'nginx',
        'php-fpm',
        'php-mysql',
        'php-redis',
        'php-curl',
        'php-mbstring',
        'mariadb-server',
        'mariadb-client',
        'redis-server',
      ],
      { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } },
    );
  }
  const bins = need();
  for (const [k, v] of Object.entries(bins)) if (!v) throw new Error(`${k} not found after installing`);
  const installDb = which('mariadb-install-db', 'mysql_install_db')!;
  const client = which('mariadb', 'mysql')!;

  // 2. a private copy of the checkout
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'keyauth-bench-'));
  fs.chmodSync(work, 0o755);
  progress(`work directory ${work}`);
  const www = path.join(work, 'www');
  fs.cpSync(src, www, { recursive: true, filter: (p) => !p.split(path.sep).includes('.git') });
  const dbPass = crypto.randomBytes(12).toString('hex');
  const credentials = fs
    .readFileSync(path.join(src, 'includes/credentials.example.php'), 'utf8')
    .replace(/\$databaseHost = "[^"]*";/, '$databaseHost = "localhost";')
    .replace(/\$databaseUsername = "[^"]*";/, '$databaseUsername = "keyauth";')
    .replace(/\$databasePassword = "[^"]*";/, `$databasePassword = "${dbPass}";`)
    .replace(/\$databaseName = "[^"]*";/, '$databaseName = "keyauth";');
  fs.writeFileSync(path.join(www, 'includes/credentials.php'), credentials);
  const api = path.join(www, 'api/1.2/index.php');
  if (process.env.KEYAUTH_APP_LIMIT !== 'keep') {
    const text = fs.readFileSync(api, 'utf8');
    const limited =
      /(rateLimit\("KeyAuthAppLimit:" \. \(\$_POST\['ownerid'\] \?\? \$_GET\['ownerid'\]\), 1, 60, )200(\))/;
    if (!limited.test(text))
      throw new Error(
        'the per-application limit line in api/1.2/index.php was not found: set KEYAUTH_APP_LIMIT=keep, or update this script',
      );
    fs.writeFileSync(api, text.replace(limited, '$11000000000$2'));
    progress('raised the hosted per-application limit (200 calls a minute) to 10^9 in the work copy');
  }
  sh('chmod', ['-R', 'a+rX', www]);

  // 3. MariaDB
  const sock = path.join(work, 'mysql.sock');
  const datadir = path.join(work, 'mysql');
  progress('MariaDB: a private instance');
  // --no-defaults: a private instance, whatever the system's my.cnf says (user, socket, ports)
  sh(installDb, [
    '--no-defaults',
    '--basedir=/usr',
    `--datadir=${datadir}`,
    ...(root ? ['--user=root'] : []),
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
  ]);
  daemon('mariadb', bins.mariadbd!, [
    '--no-defaults',
    `--datadir=${datadir}`,
    `--socket=${sock}`,
    '--skip-networking',
    `--pid-file=${path.join(work, 'mysql.pid')}`,
    ...(root ? ['--user=root'] : []),
    '--skip-log-bin',
    `--log-error=${path.join(work, 'mysql.err')}`,
    '--max-connections=1000',
  ]);
  await waitFor(
    'MariaDB',
    () =>
      fs.existsSync(sock) && spawnSync(client, ['--no-defaults', '-S', sock, '-uroot', '-e', 'select 1']).status === 0,
  );
  fs.chmodSync(sock, 0o777);
  const sql = (q: string, db = '') =>
    sh(client, ['--no-defaults', '-S', sock, '-uroot', ...(db ? [db] : []), '-N', '-B'], q);
  sql(
    `create database keyauth; create user 'keyauth'@'localhost' identified by '${dbPass}'; grant all on keyauth.* to 'keyauth'@'localhost';`,
  );
  sql(fs.readFileSync(path.join(src, 'db_structure.sql'), 'utf8'), 'keyauth');
  const secret = crypto.randomBytes(32).toString('hex');
  const ownerid = crypto.randomBytes(5).toString('hex'); // 10 characters, as the API checks
  const name = 'bench';
  const now = Math.floor(Date.now() / 1000);
  const keys = Array.from(
    { length: KEYS },
    (_, i) => `KABENCH-${String(i).padStart(4, '0')}-${crypto.randomBytes(6).toString('hex').toUpperCase()}`,
  );
  sql(
    [
      `insert into accounts (username, email, password, ownerid, role) values ('bench', 'bench@example.invalid', '', '${ownerid}', 'seller');`,
      `insert into apps (owner, name, secret, ownerid, enabled, hwidcheck, sellerkey) values ('bench', '${name}', '${secret}', '${ownerid}', 1, 1, '${crypto.randomBytes(16).toString('hex')}');`,
      `insert into subscriptions (name, level, app) values ('default', '1', '${secret}');`,
      `insert into \`keys\` (\`key\`, expires, status, level, genby, gendate, app) values ${keys.map((k) => `('${k}', '315360000', 'Not Used', '1', 'bench', '${now}', '${secret}')`).join(', ')};`,
    ].join('\n'),
    'keyauth',
  );

  // Redis at 127.0.0.1:6379 (includes/redis.php)
  let redisChild: ChildProcess | undefined;
  if (!(await redisPing(6379))) {
    progress('Redis: starting one on 127.0.0.1:6379 (includes/redis.php connects there)');
    fs.mkdirSync(path.join(work, 'redis'));
    redisChild = daemon('redis', bins.redis!, [
      '--port',
      '6379',
      '--bind',
      '127.0.0.1',
      '--dir',
      path.join(work, 'redis'),
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
    ]);
    await waitFor('Redis', () => redisPing(6379));
  }

  // PHP-FPM, static pool
  const fpmSock = path.join(work, 'php-fpm.sock');
  fs.writeFileSync(
    path.join(work, 'php-fpm.conf'),
    [
      '[global]',
      `pid = ${work}/php-fpm.pid`,
      `error_log = ${work}/php-fpm.log`,
      'daemonize = no',
      '',
      '[keyauth]',
      ...(root ? ['user = www-data', 'group = www-data', 'listen.owner = www-data', 'listen.group = www-data'] : []),
      `listen = ${fpmSock}`,
      'listen.mode = 0666',
      'listen.backlog = 4096',
      'pm = static',
      `pm.max_children = ${FPM_CHILDREN}`,
      'pm.max_requests = 0',
      `php_admin_value[mysqli.default_socket] = ${sock}`,
      `php_admin_value[error_log] = ${work}/php-error.log`,
      'php_admin_flag[log_errors] = on',
      'php_admin_value[opcache.enable] = 1',
      '',
    ].join('\n'),
  );
  const fpm = daemon('php-fpm', bins.fpm!, [
    '--nodaemonize',
    '--fpm-config',
    path.join(work, 'php-fpm.conf'),
    ...(root ? ['-R'] : []),
  ]);
  await waitFor('PHP-FPM', () => fs.existsSync(fpmSock));

  // nginx on a free loopback port
  const port = await freePort();
  const tmp = path.join(work, 'nginx-tmp');
  fs.mkdirSync(tmp, { mode: 0o777 });
  fs.chmodSync(tmp, 0o777);
  fs.writeFileSync(
    path.join(work, 'nginx.conf'),
    `
${root ? 'user www-data;' : ''}
worker_processes auto;
pid ${work}/nginx.pid;
error_log ${work}/nginx-error.log;
daemon off;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body; fastcgi_temp_path ${tmp}/fastcgi; proxy_temp_path ${tmp}/proxy; uwsgi_temp_path ${tmp}/uwsgi; scgi_temp_path ${tmp}/scgi;
  keepalive_requests 100000000; keepalive_timeout 300s;
  server {
    listen 127.0.0.1:${port};
    root ${www};
    index index.php index.html;
    location ~ \\.php$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      fastcgi_pass unix:${fpmSock};
    }
    location / { try_files $uri $uri/ =404; }
  }
}
`,
  );
  const nginx = daemon('nginx', bins.nginx!, ['-c', path.join(work, 'nginx.conf'), '-p', work]);
  const base = `http://127.0.0.1:${port}`;
  const form = (o: Record<string, string>) => new URLSearchParams(o).toString();
  await waitFor('nginx + PHP-FPM', async () => {
    const r = await fetch(`${base}/api/1.2/`, {
      method: 'POST',
      body: form({ type: 'init', ver: '1.0', name, ownerid }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    const t = await r.text();
    if (!t.includes('"success":true')) throw new Error(t);
    return true;
  });
  const versions = {
    php: sh(bins.fpm!, ['-v']).split('\n')[0]!.split(' ').slice(0, 2).join(' '),
    nginx: spawnSync(bins.nginx!, ['-v'], { encoding: 'utf8' }).stderr.trim().replace('nginx version: ', ''),
    mariadb: sh(client, ['--no-defaults', '-S', sock, '-uroot', '-N', '-B', '-e', 'select version()']).trim(),
    redis: sh(bins.redis!, ['--version']).split(' ')[2] ?? '',
  };
  const setup = `${versions.php} FPM static pool of ${FPM_CHILDREN}, ${versions.nginx}, MariaDB ${versions.mariadb}, Redis ${versions.redis.replace('v=', '')}`;
  progress(`KeyAuth answers on ${base} (${setup})`);

  // CPU groups: everything KeyAuth runs on
  const classify: Classify = (p: Proc, table: Map<number, Proc>) => {
    const g = groupsOf(table);
    return g.get(p.pid) ?? null;
  };
  const cache = new WeakMap<Map<number, Proc>, Map<number, string>>();
  const groupsOf = (table: Map<number, Proc>) => {
    let g = cache.get(table);
    if (g) return g;
    g = new Map();
    for (const pid of descendants(table, fpm.pid!)) g.set(pid, 'php-fpm');
    for (const pid of descendants(table, nginx.pid!)) g.set(pid, 'nginx');
    for (const c of children.filter((c) => c.spawnfile === bins.mariadbd))
      for (const pid of descendants(table, c.pid!)) g.set(pid, 'mariadb');
    for (const q of table.values()) {
      if (q.comm === 'redis-server' && (redisChild ? q.pid === redisChild.pid : cmdline(q.pid).includes(':6379')))
        g.set(q.pid, 'redis');
    }
    cache.set(table, g);
    return g;
  };

  const common = [
    '--port',
    String(port),
    '--proto',
    'keyauth',
    '--ka-name',
    name,
    '--ka-owner',
    ownerid,
    '--license',
    keys.join(','),
    '--hwid',
    HWID,
    '--threads',
    String(GEN_THREADS),
  ];
  progress(`activating the ${KEYS} keys once`);
  const act = await kwload([
    ...common,
    '--mode',
    'setup',
    '--total',
    String(KEYS),
    '--conns',
    String(KEYS),
    '--ip-base',
    String(1 << 20),
  ]);
  if (act.ok !== KEYS) throw new Error(`only ${act.ok} of ${KEYS} keys could be activated`);

  const rows: Row[] = [];
  let ipBase = 2 << 20;
  const run = async (id: string, workload: string, mode: string) => {
    progress(`KeyAuth: ${workload}`);
    let p0: Map<number, Proc> | undefined;
    let p1: Map<number, Proc> | undefined;
    const k = await kwload(
      [
        ...common,
        '--mode',
        mode,
        '--conns',
        String(CONNS),
        '--duration',
        String(DURATION_S),
        '--warmup',
        String(WARMUP_S),
        '--ip-base',
        String((ipBase += 1 << 20) % (1 << 24)),
      ],
      { onStart: () => (p0 = procTable()), onEnd: () => (p1 = procTable()) },
    );
    const cpu = p0 && p1 ? cpuDelta(p0, p1, classify) : {};
    const total = Object.values(cpu).reduce((a, b) => a + b, 0);
    const cores: Record<string, number> = {};
    for (const [g, s] of Object.entries(cpu)) cores[g] = s / k.duration_s;
    rows.push({
      id,
      workload,
      system: 'keyauth',
      rps: k.ok_rps,
      cpu_ms_per_1k: k.ok > 0 ? (total * 1e6) / k.ok : undefined,
      cores,
      gen_cores: k.cpu_window_s / k.duration_s,
      non2xx: k.non2xx,
      errors: k.errors,
      note: [troubles(k), k.rps !== k.ok_rps ? `${fmt(k.rps)} answers/s in all` : ''].filter(Boolean).join('; '),
    });
    await sleep(1000);
  };
  await run('hb1', 'heartbeat: `check` on a validated session', 'hb');
  await run('init', '`init` (a new session each)', 'init');
  await run('license', '`license` (an activated key: bcrypt verify)', 'license');

  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const out = {
    at: new Date().toISOString(),
    machine: machine(),
    setup,
    quick,
    duration_s: DURATION_S,
    warmup_s: WARMUP_S,
    connections: CONNS,
    rows,
  };
  const dir = path.join(here, 'results');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `keyauth-${stamp}.json`), JSON.stringify(out, null, 2) + '\n');
  console.log(`KeyAuth, ${out.at} on ${out.machine} (${setup}):\n\n${rowsTable(rows)}`);
  progress(`wrote bench/results/keyauth-${stamp}.json (npm run bench merges the newest into its side-by-side table)`);
}

async function cleanup(): Promise<void> {
  for (const c of children.reverse()) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    const exited = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(t);
  }
  if (work && !argv.includes('--keep')) fs.rmSync(work, { recursive: true, force: true });
  else if (work) progress(`kept ${work}`);
}

main().then(cleanup, async (err: unknown) => {
  console.error(err);
  await cleanup();
  process.exitCode = 1;
});
