// Direct SQL for hot paths and conditional updates: no identity map, no change-set computation,
// one round trip. Placeholders are `?` (knex raw); rows come back with snake_case column names.
import type { Orm } from './orm.js';

type Ctx = unknown;

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

  /** Throws unless the database answers (readiness). */
  async ping(): Promise<void> {
    await this.one('select 1');
  }

  /** Runs `fn` in one transaction; pass the given ctx to every statement inside. */
  transaction<T>(fn: (ctx: Ctx) => Promise<T>): Promise<T> {
    return this.orm.em.getConnection().transactional((trx) => fn(trx));
  }
}
