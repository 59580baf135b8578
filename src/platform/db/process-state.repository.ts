// The restart checkpoint of a single process without Redis (process_state): entries written in
// batches (one statement per kind and direction, values as base64 inside one JSON parameter) and
// read back at start.
import type { Sql } from './sql.js';

export interface StateEntry {
  key: string;
  value: Buffer;
  /** Epoch milliseconds; the entry means nothing after it. */
  expiresAt: number;
}

/** Rows per statement: keeps one JSON parameter a few MB at most. */
const CHUNK = 2_000;

export class ProcessStateRepository {
  constructor(private readonly sql: Sql) {}

  async load(kind: string, now: Date): Promise<StateEntry[]> {
    const rows = await this.sql.all<{ key: string; value: Buffer; expires_at: Date | string }>(
      'select key, value, expires_at from process_state where kind = ? and expires_at > ?',
      [kind, now],
    );
    return rows.map((r) => ({ key: r.key, value: r.value, expiresAt: new Date(r.expires_at).getTime() }));
  }

  /** Writes and deletes entries of one kind, all in one transaction. */
  async save(kind: string, upserts: readonly StateEntry[], deletes: readonly string[]): Promise<void> {
    if (upserts.length === 0 && deletes.length === 0) return;
    await this.sql.transaction(async (tx) => {
      for (let i = 0; i < deletes.length; i += CHUNK) {
        await this.sql.run(
          `delete from process_state where kind = ? and key in (select jsonb_array_elements_text(?::jsonb))`,
          [kind, JSON.stringify(deletes.slice(i, i + CHUNK))],
          tx,
        );
      }
      for (let i = 0; i < upserts.length; i += CHUNK) {
        const rows = upserts.slice(i, i + CHUNK).map((e) => ({
          k: e.key,
          v: e.value.toString('base64'),
          x: new Date(e.expiresAt).toISOString(),
        }));
        await this.sql.run(
          `insert into process_state (kind, key, value, expires_at)
           select ?, r.k, decode(r.v, 'base64'), r.x
           from jsonb_to_recordset(?::jsonb) as r(k text, v text, x timestamptz)
           on conflict (kind, key) do update set value = excluded.value, expires_at = excluded.expires_at`,
          [kind, JSON.stringify(rows)],
          tx,
        );
      }
    });
  }

  purgeExpired(now: Date): Promise<number> {
    return this.sql.run('delete from process_state where expires_at <= ?', [now]);
  }
}
