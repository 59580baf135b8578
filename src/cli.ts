// `keywarden` command line: serve | migrate | owner create | developer create | loadtest | secrets |
// backup | restore | release publish | relay.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig, ConfigError, type Config } from './config.js';
import { createLogger } from './logger.js';
import { accessDeps } from './compose.js';
import { createServices } from './services.js';
import { startServer } from './main.js';
import { EX_CONFIG, superviseWorkers } from './supervisor.js';
import { createAccess } from './modules/access/index.js';
import { ValidationError } from './errors.js';
import { followClockFile } from './clock.js';
import { KeyMismatchError } from './platform/db/key-fingerprints.js';
import { SHARED_KEY_SETTINGS, SecretsError, exportSecrets, importSecrets } from './platform/crypto/secrets.js';
import {
  DataDirBusyError,
  databaseUrl,
  runningEmbeddedPostgres,
  startEmbeddedPostgres,
} from './platform/db/embedded-postgres.js';
import { BackupError, dataDirNotEmpty, readBackupHeader, restoreDatabase, writeBackup } from './platform/db/backup.js';
import { loadUws, uwsBuildInUse, UwsUnavailableError, UWS_BUILDS } from './platform/http/uws-loader.js';
import { RELEASE_USAGE, releaseCommand } from './release-publish.js';

const USAGE = `usage:
  keywarden serve                                   serve the API on PORT (default 8080)
  keywarden migrate                                 apply pending database migrations and exit
  keywarden owner create --username U --password-stdin
  keywarden developer create --username U --password-stdin   (email: first of DEVELOPER_EMAILS)
  keywarden loadtest --duration=S [--url=URL ...]   measure a deployment you own (docs/loadtest.md)
  keywarden secrets export > keys.env               print the keys every host must share (secret!)
  keywarden secrets import [--force] < keys.env     store them in DATA_DIR/secrets (docs/multi-host.md)
  keywarden backup --out FILE                       the database and the shared keys in one file (secret!),
                                                    consistent while the server runs (docs/deploy.md)
  keywarden restore FILE                            into an empty DATA_DIR, or the empty DATABASE_URL
${RELEASE_USAGE.replace(/^usage:\n/, '')}
  keywarden relay --pool FILE --public-key KEY [--port P] [--data DIR]
                                                    seats for an air-gapped network (docs/air-gapped.md)
  keywarden relay id                                print this machine's relay id`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

async function serve(config: Config, asWorker = false): Promise<void> {
  if (config.faultClockFile) followClockFile(config.faultClockFile);
  // Before the database starts: a runtime no uWebSockets.js build serves is refused at once.
  loadUws();
  const log = createLogger(config, asWorker ? { worker: Number(process.env.KW_WORKER_INDEX ?? 0) } : {});
  log.info({ node: process.versions.node, uws: UWS_BUILDS[uwsBuildInUse()].release }, 'server.runtime');
  const server =
    !asWorker && config.workers > 1
      ? {
          shutdown: (
            await superviseWorkers(config, log, {
              // A worker refused to start (logged): the group stops, and a unit manager sees why.
              onRefused: () => process.exit(EX_CONFIG),
            })
          ).stop,
        }
      : await startServer(config, { log });
  // npm and tsx relay the terminal's signal, so one Ctrl-C can arrive more than once: later
  // signals are ignored and a watchdog bounds the whole shutdown instead.
  let stopping = false;
  const onSignal = (_sig: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    setTimeout(
      () => {
        log.error('server.shutdown_timeout: forcing exit');
        process.exit(1);
      },
      config.shutdownTimeoutMs + config.drainLingerMs + 30_000,
    ).unref();
    server.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'server.shutdown_failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // A worker whose supervisor is gone (SIGKILLed, crashed) hands its shards over and exits, rather
  // than live on as an orphan holding the port and its leases.
  if (asWorker && process.connected) process.once('disconnect', () => onSignal('SIGTERM'));
  // A background task's rejected promise is a bug to log, not a reason to take every client down.
  process.on('unhandledRejection', (err) => log.error({ err }, 'process.unhandled_rejection'));
  // Benchmarks start workers with --expose-gc and ask for a collection before a memory sample, and
  // for the trim that follows one within MEMORY_TRIM_MS anyway.
  const gc = (globalThis as { gc?: () => void }).gc;
  const trim = 'services' in server ? server.services.memoryTrim : null;
  if (gc)
    process.on('SIGUSR2', () => {
      gc();
      trim?.trimNow();
    });
}

/**
 * Commands that only need the database use the embedded PostgreSQL of a Keywarden already running
 * on DATA_DIR (its address is in DATA_DIR's lock): starting a second server on the same files is
 * refused, and stopping the running one would take that server down. With nobody running, they
 * start (and stop) their own.
 */
async function withDatabase(config: Config): Promise<Config> {
  if (config.databaseUrl) return config;
  const running = await runningEmbeddedPostgres(config.dataDir);
  return running ? { ...config, databaseUrl: databaseUrl(running) } : config;
}

async function createTopAccount(config: Config, kind: 'owner' | 'developer', args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { username: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
  });
  if (!values.username || !values['password-stdin']) {
    console.error(USAGE);
    return 2;
  }
  // Checked before anything starts: a missing setting is a one-line message, not a stack trace.
  if (kind === 'developer' && config.developerEmails.length === 0) {
    throw new ConfigError("DEVELOPER_EMAILS must name at least one address (the developer account's email)");
  }
  const password = await readStdin();
  const log = createLogger({ logLevel: config.logLevel === 'info' ? 'warn' : config.logLevel });
  const s = await createServices(await withDatabase(config), log);
  try {
    // Creating a top account reaches no application: the reach ports are never asked.
    const { auth } = createAccess(
      accessDeps(s, { reachableApps: async () => [], reachesApp: async () => false, recordApp: async () => null }),
    );
    const created =
      kind === 'owner'
        ? await auth.ensureOwner(values.username, password)
        : await auth.ensureDeveloper(values.username, password);
    console.log(created ? `${kind} ${values.username} created` : `an account named ${values.username} already exists`);
    return created ? 0 : 1;
  } finally {
    await s.close();
  }
}

/**
 * The load test is a tool beside the server (loadtest/, TypeScript run by tsx like the benchmarks),
 * not part of the build: found from this file upwards (src/ or dist/src/) and run as a child that
 * owns the terminal. Ctrl-C reaches it directly; a SIGTERM sent to us only is passed on.
 */
async function loadtest(args: string[]): Promise<number> {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3 && !fs.existsSync(path.join(dir, 'loadtest', 'main.ts')); i++) dir = path.dirname(dir);
  const entry = path.join(dir, 'loadtest', 'main.ts');
  if (!fs.existsSync(entry)) {
    console.error('keywarden loadtest: loadtest/main.ts is not here (it comes with the source checkout)');
    return 2;
  }
  const tsx = pathToFileURL(createRequire(path.join(dir, 'package.json')).resolve('tsx')).href;
  const child = spawn(process.execPath, ['--import', tsx, entry, ...args], { stdio: 'inherit' });
  const forward = (sig: NodeJS.Signals) => child.kill(sig);
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
}

/** `secrets export`: the shared keys as KEY=value lines; `secrets import`: those lines into DATA_DIR/secrets. */
async function secretsCommand(config: Config, sub: string | undefined, args: string[]): Promise<number> {
  if (sub === 'export') {
    const values = await exportSecrets(config);
    process.stderr.write('keywarden: these are secret keys; copy them only over a channel you trust\n');
    for (const [k, v] of Object.entries(values)) process.stdout.write(`${k}=${v}\n`);
    return 0;
  }
  if (sub === 'import') {
    const { values: opts } = parseArgs({ args, options: { force: { type: 'boolean' } } });
    const values: Record<string, string> = {};
    for (const line of (await readStdin()).split(/\r?\n/)) {
      const m = /^\s*([A-Z_]+)=(.*)$/.exec(line);
      if (m && SHARED_KEY_SETTINGS.includes(m[1]!)) values[m[1]!] = m[2]!.trim();
    }
    const written = await importSecrets(config, values, opts.force === true);
    console.log(
      written.length > 0 ? `stored: ${written.join(', ')}` : 'the keys were already stored here; nothing changed',
    );
    return 0;
  }
  console.error(USAGE);
  return 2;
}

/** `backup --out FILE`: a consistent snapshot of the database plus the shared keys (platform/db/backup.ts). */
async function backupCommand(config: Config, args: string[]): Promise<number> {
  let out: string | undefined;
  try {
    out = parseArgs({ args, options: { out: { type: 'string' } } }).values.out;
  } catch {
    out = undefined; // an unknown option: the usage says what there is
  }
  if (!out) {
    console.error(USAGE);
    return 2;
  }
  out = path.resolve(out);
  try {
    fs.accessSync(path.dirname(out), fs.constants.W_OK);
  } catch (err) {
    throw new BackupError(`cannot write ${out}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const log = createLogger({ logLevel: config.logLevel === 'info' ? 'warn' : config.logLevel });
  // The keys first: a DATA_DIR that never ran a server has none, and then nothing is started.
  const secrets = await exportSecrets(config);
  const attached = await withDatabase(config);
  let own: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  if (!attached.databaseUrl) {
    if (!fs.existsSync(path.join(config.dataDir, 'pg', 'PG_VERSION')))
      throw new BackupError(`DATA_DIR ${config.dataDir} holds no database (and DATABASE_URL is not set)`);
    own = await startEmbeddedPostgres(config.dataDir, log);
  }
  try {
    const started = Date.now();
    const { rows } = await writeBackup(attached.databaseUrl ?? own!.target, secrets, out);
    const total = Object.values(rows).reduce((a, b) => a + b, 0);
    process.stderr.write("keywarden: the backup holds the deployment's secret keys; store it like them\n");
    console.log(
      `backup written to ${out}: ${total} rows in ${Object.keys(rows).length} tables, ` +
        `${fs.statSync(out).size} bytes, ${Date.now() - started} ms`,
    );
    return 0;
  } finally {
    await own?.stop();
  }
}

/** `restore FILE`: into an empty DATA_DIR (embedded PostgreSQL) or the empty database of DATABASE_URL. */
async function restoreCommand(config: Config, args: string[]): Promise<number> {
  if (args.length !== 1 || !args[0]) {
    console.error(USAGE);
    return 2;
  }
  const file = path.resolve(args[0]);
  const header = await readBackupHeader(file);
  // Keys set in the environment win over DATA_DIR/secrets: they must be the backup's, or no host starts.
  const set: Record<string, string | undefined> = {
    RESPONSE_SIGNING_KEY: config.responseSigningKey,
    LICENSE_HASH_KEY: config.licenseHashKey,
    TWO_FACTOR_KEY: config.twoFactorKey,
  };
  for (const [name, value] of Object.entries(set))
    if (value !== undefined && value !== header.secrets[name])
      throw new BackupError(`${name} is set here to another key than the backup's: unset it, or set the backup's`);
  const log = createLogger({ logLevel: config.logLevel === 'info' ? 'warn' : config.logLevel });
  const started = Date.now();
  let restored: Awaited<ReturnType<typeof restoreDatabase>>;
  if (config.databaseUrl) {
    restored = await restoreDatabase(file, config.databaseUrl, log);
  } else {
    const why = await dataDirNotEmpty(config.dataDir);
    if (why) throw new BackupError(`refusing to restore into DATA_DIR ${config.dataDir}, which is not empty: ${why}`);
    const made = ['pg', 'pg-run', 'pg-password', 'pg-runtime', 'secrets', 'keywarden.lock'];
    try {
      const embedded = await startEmbeddedPostgres(config.dataDir, log);
      try {
        restored = await restoreDatabase(file, embedded.target, log);
      } finally {
        await embedded.stop();
      }
    } catch (err) {
      // Nothing of a half-restored database is left behind: the next attempt finds DATA_DIR empty again.
      for (const part of made) fs.rmSync(path.join(config.dataDir, part), { recursive: true, force: true });
      throw err;
    }
  }
  const stored = await importSecrets(config, header.secrets, false);
  const total = Object.values(restored.rows).reduce((a, b) => a + b, 0);
  console.log(
    `restored the backup of ${header.created_at}: ${total} rows in ${header.tables.length} tables, ` +
      `${header.migrations.length} migrations, in ${Date.now() - started} ms`,
  );
  console.log(
    stored.length > 0
      ? `the deployment's keys were stored in ${path.join(config.dataDir, 'secrets')}` +
          (config.databaseUrl
            ? ' (hosts started without them set read them there: copy them with `keywarden secrets export`)'
            : '')
      : "the deployment's keys were already in place",
  );
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, sub, ...rest] = argv;
  if (cmd === 'loadtest') return loadtest(argv.slice(1)); // needs no server configuration
  if (cmd === 'release') return releaseCommand(argv.slice(1), process.env); // a client of a deployment
  if (cmd === 'relay') {
    // Its own entry (no server graph); it reads process.argv and exits by itself.
    await import('./relay-cli.js');
    return new Promise<number>(() => undefined);
  }
  const config = loadConfig();
  switch (cmd) {
    case 'serve':
      await serve(config);
      return -1; // keeps running
    case 'worker': // one worker of `serve` with WORKERS > 1
      await serve(config, true);
      return -1;
    case 'migrate': {
      const log = createLogger(config);
      const s = await createServices(await withDatabase(config), log);
      await s.close();
      return 0;
    }
    case 'secrets':
      return secretsCommand(config, sub, rest);
    case 'backup':
      return backupCommand(config, argv.slice(1));
    case 'restore':
      return restoreCommand(config, argv.slice(1));
    case 'owner':
    case 'developer':
      if (sub !== 'create') break;
      return createTopAccount(config, cmd, rest);
  }
  console.error(USAGE);
  return 2;
}

/**
 * A worker that refuses to start for a reason starting it again cannot cure (its configuration, keys
 * that differ from the deployment's, a runtime no uWebSockets.js build serves) tells its supervisor
 * why over the IPC channel and exits with EX_CONFIG: the supervisor logs that one line and stops the
 * group instead of starting the worker again. Elsewhere (no supervisor) it prints the reason itself.
 */
function refuseAsWorker(err: unknown): boolean {
  const refusal = err instanceof ConfigError || err instanceof KeyMismatchError || err instanceof UwsUnavailableError;
  if (!refusal || process.argv[2] !== 'worker' || !process.send || !process.connected) return false;
  const reason = err instanceof ConfigError ? `configuration error: ${err.message}` : err.message;
  try {
    process.send({ refused: reason }, (sendErr: Error | null) => {
      if (sendErr) console.error(reason);
      process.exit(EX_CONFIG);
    });
  } catch {
    console.error(reason);
    process.exit(EX_CONFIG);
  }
  return true;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (refuseAsWorker(err)) return;
    if (err instanceof ConfigError) console.error(`configuration error: ${err.message}`);
    else if (err instanceof DataDirBusyError || err instanceof UwsUnavailableError || err instanceof KeyMismatchError)
      console.error(err.message);
    else if (err instanceof SecretsError) console.error(`keywarden secrets: ${err.message}`);
    else if (err instanceof BackupError) console.error(`keywarden ${process.argv[2]}: ${err.message}`);
    else if (err instanceof ValidationError)
      console.error(err.issues.map((i) => `${i.loc.slice(1).join('.')}: ${i.msg}`).join('\n'));
    else console.error(err);
    process.exit(1);
  },
);
