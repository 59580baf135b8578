// One services object, no module singletons (STYLE 8): createServices(config) builds everything
// a worker needs; tests build their own. close() releases in reverse order of creation.
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { systemClock, type Clock } from './clock.js';
import { initOrm, migrate, type Orm } from './platform/db/orm.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './platform/db/embedded-postgres.js';
import { Sql } from './platform/db/sql.js';
import { AccountRepository } from './modules/access/account.repository.js';
import { SessionRepository } from './modules/access/session.repository.js';
import { ApplicationRepository } from './modules/apps/application.repository.js';
import { LicenseRepository } from './modules/keys/license.repository.js';
import { BlacklistRepository } from './modules/apps/blacklist.repository.js';
import { AuditRepository } from './modules/audit/audit.repository.js';
import { KeyTouchesRepository } from './modules/activation/key-touches.repository.js';
import { NonceRepository } from './modules/client/nonce.repository.js';
import type { Coordinator } from './platform/cluster/coordinator.js';
import { LocalCoordinator } from './platform/cluster/local.coordinator.js';
import { RedisCoordinator } from './platform/cluster/redis.coordinator.js';
import { loadSecrets, type Secrets } from './platform/crypto/secrets.js';
import { GeoLocator, locationText } from './modules/geo/geo.js';
import { SESSION_KEY_PREFIX } from './modules/client/client-sessions.js';

export interface Repositories {
  accounts: AccountRepository;
  sessions: SessionRepository;
  apps: ApplicationRepository;
  licenses: LicenseRepository;
  blacklist: BlacklistRepository;
  audit: AuditRepository;
  nonces: NonceRepository;
  /** Last login and IP of activated keys, written behind the answer. */
  keyTouches: KeyTouchesRepository;
}

export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly clock: Clock;
  readonly orm: Orm;
  readonly sql: Sql;
  readonly repos: Repositories;
  readonly coordinator: Coordinator;
  readonly secrets: Secrets;
  /** GEOIP_DB lookups (activation geo, log locations). */
  readonly geo: GeoLocator;
  /** Closes the coordinator, the database pool and (last) the embedded PostgreSQL. Idempotent. */
  close(): Promise<void>;
}

export interface ServiceOptions {
  clock?: Clock;
  /** Run migrations on start (true for `serve`; the cluster primary runs them once for all workers). */
  migrate?: boolean;
}

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
            'See README "Redis persistence".',
        );
      }
    }
    const sql = new Sql(orm);
    const repos: Repositories = {
      accounts: new AccountRepository(orm),
      sessions: new SessionRepository(orm),
      apps: new ApplicationRepository(orm, sql),
      licenses: new LicenseRepository(sql),
      blacklist: new BlacklistRepository(orm, sql),
      audit: new AuditRepository(
        sql,
        log,
        () => clock.now(),
        async (ip) => locationText(await geo.lookup(ip)),
      ),
      nonces: new NonceRepository(sql),
      keyTouches: new KeyTouchesRepository(sql, log),
    };
    let closing: Promise<void> | undefined;
    const o = orm;
    const c = coordinator;
    return {
      config,
      log,
      clock,
      orm: o,
      sql,
      repos,
      coordinator: c,
      secrets,
      geo,
      close: () =>
        (closing ??= (async () => {
          await repos.audit.flush();
          repos.audit.close();
          await repos.keyTouches.close();
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
