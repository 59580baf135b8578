// The MikroORM bootstrap. Only platform/db imports the driver; the rest of the code gets an `Orm` handle.
import { MikroORM } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type { Logger } from 'pino';
import { ENTITIES } from './entities/index.js';
import { MIGRATIONS } from './migrations/index.js';
import type { DbTarget } from './embedded-postgres.js';
import { scopeAsyncContexts } from './async-context.js';
// CommonJS without statically detectable named exports: import the default under real Node ESM.
import pgConnectionString from 'pg-connection-string';
import pg from 'pg';

const parsePgUrl = pgConnectionString.parse;

interface ParsedDbTarget extends DbTarget {
  ssl?: unknown;
}

/** DATABASE_URL -> parts; understands `?host=/socket/dir` and sslmode like libpq. */
function parseDatabaseUrl(url: string): ParsedDbTarget {
  const p = parsePgUrl(url);
  return {
    host: p.host ?? 'localhost',
    port: p.port ? Number(p.port) : 5432,
    user: p.user ?? 'postgres',
    password: p.password ?? '',
    dbName: p.database ?? 'postgres',
    ...(p.ssl ? { ssl: p.ssl } : {}),
  };
}

function connectionParts(t: ParsedDbTarget) {
  return {
    host: t.host,
    port: t.port,
    user: t.user,
    password: t.password,
    dbName: t.dbName,
    ...(t.ssl ? { driverOptions: { connection: { ssl: t.ssl } } } : {}),
  };
}

export type Orm = MikroORM;

interface OrmOptions {
  /** A DATABASE_URL, or the parts of an embedded server's address (a socket directory as host). */
  url: string | DbTarget;
  poolMax?: number;
  logger?: Logger;
}

export async function initOrm({ url, poolMax = 10, logger }: OrmOptions): Promise<Orm> {
  // The ORM's AsyncLocalStorage contexts cost every promise of the process only while it works.
  scopeAsyncContexts();
  return MikroORM.init({
    // Always explicit parts: MikroORM's own URL parsing drops `?host=` (a socket directory).
    ...connectionParts(typeof url === 'string' ? parseDatabaseUrl(url) : url),
    entities: ENTITIES,
    // Entities are EntitySchema definitions: no reflection and no file-system discovery.
    discovery: { disableDynamicFileAccess: true, requireEntitiesArray: true },
    extensions: [Migrator],
    migrations: {
      // Listed explicitly so migrations load the same way under tsx, vitest and a bundler.
      migrationsList: MIGRATIONS,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      emit: 'ts',
      path: 'src/platform/db/migrations',
    },
    pool: { min: 0, max: poolMax },
    forceUtcTimezone: true,
    // Request code always forks an EntityManager; the global one must never be used by accident.
    allowGlobalContext: false,
    debug: false,
    logger: logger ? (msg) => logger.debug({ orm: true }, msg) : () => undefined,
  });
}

const MIGRATION_LOCK = 0x4b57_4d31; // "KWM1": one advisory lock id for every Keywarden process

/**
 * Applies every pending migration; returns the names applied. Processes starting together
 * (cluster workers, several hosts) take turns on a PostgreSQL advisory lock, held on a
 * connection of its own, so two of them never run the same migration.
 */
export async function migrate(orm: Orm, target: string | DbTarget): Promise<string[]> {
  const t = typeof target === 'string' ? parseDatabaseUrl(target) : target;
  const lock = new pg.Client({ host: t.host, port: t.port, user: t.user, password: t.password, database: t.dbName });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const applied = await orm.getMigrator().up();
    return applied.map((m) => m.name);
  } finally {
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await lock.end();
  }
}
