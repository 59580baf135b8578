// What a worker opens before any module runs: the database (embedded PostgreSQL without
// DATABASE_URL, migrations), the secrets and the deployment's key check, the geo database, the
// coordinator (Redis or in-process), the audit writer every module writes to, the memory trimmer.
// close() releases them in reverse order. compose.ts builds the modules on them.
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { systemClock, type Clock } from './clock.js';
import { initOrm, migrate, type Orm } from './platform/db/orm.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './platform/db/embedded-postgres.js';
import { Sql } from './platform/db/sql.js';
import { checkDeploymentKeys } from './platform/db/key-fingerprints.js';
import type { Coordinator } from './platform/cluster/coordinator.js';
import { LocalCoordinator } from './platform/cluster/local.coordinator.js';
import { RedisCoordinator } from './platform/cluster/redis.coordinator.js';
import { loadSecrets, type Secrets } from './platform/crypto/secrets.js';
import { startMallocTrim, type MallocTrimmer } from './platform/runtime/malloc-trim.js';
import { createAudit, type AuditModule } from './modules/audit/index.js';
import { SESSION_KEY_PREFIX } from './modules/client/index.js';
import { GeoLocator, locationText } from './modules/geo/index.js';

export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly clock: Clock;
  readonly orm: Orm;
  readonly sql: Sql;
  /** The audit module: every module writes to it; close() flushes what is queued. */
  readonly audit: AuditModule;
  readonly coordinator: Coordinator;
  readonly secrets: Secrets;
  /** GEOIP_DB lookups (activation geo, log locations). */
  readonly geo: GeoLocator;
  /** Gives freed C-heap memory back after full collections (MEMORY_TRIM_MS); null when off or impossible here. */
  readonly memoryTrim: MallocTrimmer | null;
  /** Closes the coordinator, the database pool and (last) the embedded PostgreSQL. Idempotent. */
  close(): Promise<void>;
}

interface ServiceOptions {
  clock?: Clock;
  /** Run migrations on start (true for `serve`; the cluster primary runs them once for all workers). */
  migrate?: boolean;
}

/** One services object, no module singletons: close() releases in reverse order of creation. */
export async function createServices(config: Config, log: Logger, opts: ServiceOptions = {}): Promise<Services> {
  const clock = opts.clock ?? systemClock;
  let embedded: EmbeddedPostgres | undefined;
  let orm: Orm | undefined;
  let coordinator: Coordinator | undefined;
  try {
    if (!config.databaseUrl) embedded = await startEmbeddedPostgres(config.dataDir, log);
    orm = await initOrm({ url: config.databaseUrl ?? embedded!.target, logger: log });
    if (opts.migrate !== false) {
      const applied = await migrate(orm, config.databaseUrl ?? embedded!.target);
      if (applied.length > 0) log.info({ applied }, 'db.migrated');
    }
    const secrets = await loadSecrets(config);
    // A host whose shared keys differ from the deployment's refuses to start (KeyMismatchError).
    await checkDeploymentKeys(
      new Sql(orm),
      [
        { name: `response_signing:${secrets.signing.kid}`, setting: 'RESPONSE_SIGNING_KEY', key: secrets.signingSeed },
        { name: 'license_hash', setting: 'LICENSE_HASH_KEY', key: secrets.licenseHashKey },
        { name: 'two_factor', setting: 'TWO_FACTOR_KEY', key: secrets.twoFactorKey },
      ],
      new Date(clock.now()),
    );
    const geo = await GeoLocator.open(config.geoipDb, log);
    coordinator = config.redisUrl
      ? new RedisCoordinator(config.redisUrl, config.redisPrefix)
      : new LocalCoordinator(() => clock.now(), { durablePrefixes: [SESSION_KEY_PREFIX] });
    if (coordinator instanceof RedisCoordinator) {
      await coordinator.ping();
      const persistence = await coordinator.persistence();
      if (persistence !== 'aof') {
        log.warn(
          { persistence },
          'redis.no_persistence: client and heartbeat sessions live in Redis; without appendonly yes ' +
            'a Redis restart ends every one of them (clients must init and activate again). ' +
            'See docs/operations.md "Redis persistence".',
        );
      }
    }
    const sql = new Sql(orm);
    const audit = createAudit({
      sql,
      log,
      now: () => clock.now(),
      locate: async (ip) => locationText(await geo.lookup(ip)),
    });
    const memoryTrim =
      config.memoryTrimMs > 0
        ? startMallocTrim({
            minIntervalMs: config.memoryTrimMs,
            onTrim: (seconds) => log.debug({ ms: Math.round(seconds * 1e4) / 10 }, 'memory.trimmed'),
          })
        : null;
    if (config.memoryTrimMs > 0 && !memoryTrim)
      log.info(
        'memory.trim_unavailable: no glibc malloc_trim to call here; freed C-heap memory stays with the process',
      );
    let closing: Promise<void> | undefined;
    const o = orm;
    const c = coordinator;
    return {
      config,
      log,
      clock,
      orm: o,
      sql,
      audit,
      coordinator: c,
      secrets,
      geo,
      memoryTrim,
      close: () =>
        (closing ??= (async () => {
          memoryTrim?.stop();
          await audit.repository.flush();
          audit.repository.close();
          await c.close();
          await o.close(true);
          await embedded?.stop();
        })()),
    };
  } catch (err) {
    await coordinator?.close().catch(() => undefined);
    await orm?.close(true).catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw err;
  }
}
