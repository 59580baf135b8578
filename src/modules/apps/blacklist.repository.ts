import { createHash, randomUUID } from 'node:crypto';
import type { Orm } from '../../platform/db/orm.js';
import { BlacklistEntrySchema, type BlacklistEntry, type BlacklistType } from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';

export class BlacklistRepository {
  constructor(
    private readonly orm: Orm,
    private readonly sql: Sql,
  ) {}

  /** Adds an entry; adding an existing (type, value) returns the existing entry. */
  async add(
    appId: string,
    type: BlacklistType,
    value: string,
    reason: string,
    createdBy: string | null,
    now: Date,
  ): Promise<BlacklistEntry> {
    // Adding it again keeps the entry; a reason given then replaces the old one.
    const row = await this.sql.one<{ id: string }>(
      `insert into blacklist_entries (id, app_id, type, value, value_hash, created_at, created_by, reason)
       values (?, ?, ?, ?, ?, ?, ?, ?)
       on conflict (app_id, type, value_hash) do update set value = excluded.value,
         reason = case when excluded.reason <> '' then excluded.reason else blacklist_entries.reason end
       returning id`,
      [randomUUID(), appId, type, value, createHash('sha256').update(value).digest('hex'), now, createdBy, reason],
    );
    return this.orm.em.fork().findOneOrFail(BlacklistEntrySchema, { id: row!.id });
  }

  findById(id: string): Promise<BlacklistEntry | null> {
    return this.orm.em.fork().findOne(BlacklistEntrySchema, { id });
  }

  async remove(id: string): Promise<void> {
    await this.orm.em.fork().nativeDelete(BlacklistEntrySchema, { id });
  }

  /** Every (type, value) of an application's blacklist: the client hot path caches them as sets. */
  /** The application a blacklist entry belongs to; null when there is none. */
  async appOf(id: string): Promise<string | null> {
    const row = await this.sql.one<{ app_id: string }>('select app_id from blacklist_entries where id = ?', [id]);
    return row?.app_id ?? null;
  }

  values(appId: string): Promise<{ type: BlacklistType; value: string }[]> {
    return this.sql.all<{ type: BlacklistType; value: string }>(
      'select type, value from blacklist_entries where app_id = ?',
      [appId],
    );
  }

  list(appId: string): Promise<BlacklistEntry[]> {
    return this.orm.em.fork().find(BlacklistEntrySchema, { appId }, { orderBy: { createdAt: 'desc' } });
  }
}
