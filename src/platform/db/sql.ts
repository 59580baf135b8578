// Direct SQL for hot paths and conditional updates: no identity map, no change-set computation,
// one round trip. Placeholders are `?` (knex raw); rows come back with snake_case column names.
// `prepared` is the hottest reads' path: `$n` placeholders, the values sent apart from the text
// (MikroORM's execute quotes them into it), on a connection of the same pool, as a named
// statement that PostgreSQL parses and plans once per connection.
import type { Orm } from './orm.js';

type Ctx = unknown;

/** What `prepared` needs of a pooled pg client (knex hands those out). */
interface PgClient {
  query(q: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[]; rowCount: number | null }>;
}
interface PgPool {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(c: PgClient): unknown;
}

/**
 * Statement names by text, for the whole process: every pooled connection prepares a name once,
 * and one name must never stand for two texts (pg refuses that), whichever Sql asked.
 */
const statementNames = new Map<string, string>();
/** Prepared texts must be fixed strings; a text built per call would prepare without end. */
const MAX_PREPARED = 200;

/** Raw rows carry timestamptz as text (MikroORM's pg type parsers); this reads one as a Date. */
export function toDate(v: Date | string | null | undefined): Date | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v : new Date(v);
}

export class Sql {
  constructor(private readonly orm: Orm) {}

  all<T = Record<string, unknown>>(sql: string, params: unknown[] = [], ctx?: Ctx): Promise<T[]> {
    return this.orm.em.getConnection().execute<T[]>(sql, params as never[], 'all', ctx as never);
  }

  async one<T = Record<string, unknown>>(sql: string, params: unknown[] = [], ctx?: Ctx): Promise<T | undefined> {
    return (await this.all<T>(sql, params, ctx))[0];
  }

  /** Runs a statement; returns the number of affected rows. */
  async run(sql: string, params: unknown[] = [], ctx?: Ctx): Promise<number> {
    const r = await this.orm.em
      .getConnection()
      .execute<{ affectedRows: number }>(sql, params as never[], 'run', ctx as never);
    return r.affectedRows;
  }

  /**
   * Runs a fixed statement with `$1`-style placeholders as a named prepared statement, outside any
   * transaction. Never for text assembled per call (lists of placeholders, batches): those go
   * through `all`/`run`.
   */
  async prepared<T = Record<string, unknown>>(
    text: string,
    params: unknown[],
  ): Promise<{ rows: T[]; rowCount: number }> {
    let name = statementNames.get(text);
    if (name === undefined) {
      if (statementNames.size >= MAX_PREPARED)
        throw new Error('too many prepared statements: is a text built per call?');
      name = `kw${statementNames.size}`;
      statementNames.set(text, name);
    }
    const pool = (this.orm.em.getConnection().getKnex() as unknown as { client: PgPool }).client;
    const client = await pool.acquireConnection();
    try {
      const r = await client.query({ name, text, values: params });
      return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
    } finally {
      pool.releaseConnection(client);
    }
  }

  /** Throws unless the database answers (readiness). */
  async ping(): Promise<void> {
    await this.one('select 1');
  }

  /** Runs `fn` in one transaction; pass the given ctx to every statement inside. */
  transaction<T>(fn: (ctx: Ctx) => Promise<T>): Promise<T> {
    return this.orm.em.getConnection().transactional((trx) => fn(trx));
  }
}
