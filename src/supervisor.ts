// Cluster mode (WORKERS=N, needs REDIS_URL): this primary process starts the embedded PostgreSQL
// when no DATABASE_URL is given, then runs N worker processes that each listen on the same PORT
// (uWS listens with SO_REUSEPORT, so the kernel spreads connections over them). A worker that
// dies is started again, unless it refused to start for a reason a restart cannot cure (exit code
// EX_CONFIG: its configuration, keys that differ from the deployment's): then the supervisor logs
// that reason in one fatal line and stops the whole group. SIGTERM/SIGINT stop every worker in order
// (each hands its shards over) and the database last.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import {
  startEmbeddedPostgres,
  databaseUrl as databaseUrlOf,
  type EmbeddedPostgres,
} from './platform/db/embedded-postgres.js';

const RESPAWN_DELAY_MS = 1_000;

/**
 * The exit code of a worker (and then of the group) that refused to start for a configuration
 * reason (sysexits.h EX_CONFIG). Starting it again would fail the same way: a unit manager can be
 * told not to (systemd: RestartPreventExitStatus=78).
 */
export const EX_CONFIG = 78;

/**
 * glibc malloc settings every Keywarden process should run with (`npm start` and the systemd
 * units set them; workers get them from here unless set otherwise). glibc reads them once, at the
 * first allocation, so they cannot be set from inside a running process. With glibc's defaults a
 * server that has set up 100,000 sessions kept 1.2 KB per session of freed native memory (the
 * allocator's per-thread arenas and a heap top it never trimmed): RSS per live session 1,345 B
 * at 100,000, of which V8 held about 520. Two arenas and a fixed trim threshold return it; the
 * bench measured no throughput cost (docs/operations.md "Memory").
 */
export const MALLOC_DEFAULTS: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_TRIM_THRESHOLD_: '131072',
};

/** `env` with MALLOC_DEFAULTS for what it does not set itself. */
export function withMallocDefaults(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const [name, value] of Object.entries(MALLOC_DEFAULTS)) out[name] ??= value;
  return out;
}

interface Supervisor {
  stop(): Promise<void>;
}

export async function superviseWorkers(
  config: Config,
  log: Logger,
  o: {
    /** After a worker refused to start (logged, every worker stopped, the database too). */
    onRefused: () => void;
  },
): Promise<Supervisor> {
  let embedded: EmbeddedPostgres | undefined;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    // This process holds DATA_DIR's lock and restarts the database if it dies; the workers only
    // connect to it (their pools reconnect by themselves after a restart).
    embedded = await startEmbeddedPostgres(config.dataDir, log);
    databaseUrl = databaseUrlOf(embedded.target);
  }
  // The worker runs the CLI next to this module: dist/src/cli.js when the primary runs compiled
  // JavaScript (npm start), src/cli.ts under the TypeScript loader in tests and development.
  const cli = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './cli.ts' : './cli.js', import.meta.url));
  const children = new Map<number, ChildProcess>();
  let stopping = false;

  const startWorker = (index: number): void => {
    // execArgv carries the TypeScript loader the primary itself runs under (none for compiled JS).
    const child = spawn(process.execPath, [...process.execArgv, cli, 'worker'], {
      // The IPC channel carries nothing: its closing tells the worker that this process is gone.
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
      env: withMallocDefaults({
        ...process.env,
        DATABASE_URL: databaseUrl,
        WORKERS: '1',
        KW_WORKER_INDEX: String(index),
      }),
    });
    children.set(index, child);
    let refused: string | undefined;
    child.on('message', (m: unknown) => {
      if (m !== null && typeof m === 'object' && typeof (m as { refused?: unknown }).refused === 'string')
        refused = (m as { refused: string }).refused;
    });
    child.once('exit', (code, signal) => {
      children.delete(index);
      if (stopping) return;
      if (code === EX_CONFIG) {
        // One line for the group, whichever worker refused first; the others are stopped. Its reason
        // may still be in the IPC channel when 'exit' fires: the channel's end comes after it.
        const report = () => {
          if (stopping) return;
          log.fatal(
            { worker: index, code, reason: refused ?? 'see the worker output above' },
            `cluster.worker_refused: ${refused ?? 'a worker refused to start for a configuration reason'}; ` +
              'stopping every worker, not starting it again',
          );
          void supervisor.stop().then(o.onRefused, o.onRefused);
        };
        if (child.connected) child.once('disconnect', report);
        else report();
        return;
      }
      log.error({ worker: index, code, signal }, 'cluster.worker_died: starting it again');
      setTimeout(() => !stopping && startWorker(index), RESPAWN_DELAY_MS).unref();
    });
  };
  const supervisor: Supervisor = {
    async stop() {
      stopping = true;
      await Promise.all(
        [...children.values()].map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.exitCode !== null || c.signalCode !== null) return resolve();
              c.once('exit', () => resolve());
              c.kill('SIGTERM');
            }),
        ),
      );
      await embedded?.stop();
      log.info('cluster.stopped');
    },
  };
  for (let i = 0; i < config.workers; i++) startWorker(i);
  log.info({ workers: config.workers, port: config.port }, 'cluster.started');
  return supervisor;
}
