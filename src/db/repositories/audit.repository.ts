// Audit log. Client calls write one entry each, so writes are batched: entries queue and are
// flushed as one multi-row INSERT on the next turn of the event loop (or at 500 entries).
// Readers in this process call flush() first, so a request sees the entries written before it.
import type { Logger } from 'pino';
import type { AuditLevel } from '../entities/index.js';
import type { Sql } from '../sql.js';

export interface AuditInput {
  appId: string | null;
  action: string;
  level?: AuditLevel;
  detail?: string;
  ip?: string;
  location?: string;
  screen?: string;
  actorId?: string | null;
  resellerId?: string | null;
  at?: Date;
}

export interface AuditRow {
  id: string;
  app_id: string | null;
  at: Date;
  level: AuditLevel;
  action: string;
  detail: string;
  ip: string;
  location: string;
  screen: string;
  actor_id: string | null;
  reseller_id: string | null;
}

export interface AuditQuery {
  appId: string;
  level?: string | undefined;
  action?: string | undefined;
  limit: number;
  before?: string | undefined;
  /** Only entries whose reseller_id is one of these (reseller scoping); undefined: all. */
  resellerIds?: readonly string[] | undefined;
}

const MAX_BATCH = 500;

/** PostgreSQL text cannot hold U+0000: an entry quoting client input keeps it readable instead of failing. */
function text(v: string | undefined): string {
  return v === undefined ? '' : v.includes('\0') ? v.replaceAll('\0', '\uFFFD') : v;
}

export class AuditRepository {
  private queue: AuditInput[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;

  /**
   * `locate` turns an entry's IP into its Location column (SPEC "Log entry") when the writer gave
   * none; it runs here, at flush, so no request waits for it.
   */
  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly locate: (ip: string) => Promise<string> = async () => '',
  ) {}

  write(entry: AuditInput): void {
    this.queue.push(entry.at ? entry : { ...entry, at: new Date(this.now()) });
    if (this.queue.length >= MAX_BATCH) void this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  /** Writes everything queued so far; resolves when it is in the database. */
  flush(): Promise<void> {
    this.scheduled = false;
    if (this.queue.length === 0) return this.flushing;
    // One INSERT at a time, and each takes what queued up meanwhile: under load a flush per event
    // loop turn chained thousands of INSERTs of a few rows, which fell behind and held every
    // waiting entry in memory (over 1 KB per heartbeat session set up at full speed; issue 13).
    this.flushing = this.flushing.then(async () => {
      while (this.queue.length > 0) await this.insertBatch(this.queue.splice(0, MAX_BATCH));
    });
    return this.flushing;
  }

  /**
   * One multi-row INSERT; should it fail, the entries go in one at a time, so an entry the database
   * refuses costs only itself and never the valid entries that shared its batch.
   */
  private async insertBatch(batch: AuditInput[]): Promise<void> {
    try {
      await this.insert(batch);
    } catch (err) {
      if (batch.length === 1) {
        this.log.error({ err, action: batch[0]!.action }, 'audit.write_failed');
        return;
      }
      this.log.warn({ err, size: batch.length }, 'audit.batch_failed_retrying_singly');
      for (const e of batch) await this.insertBatch([e]);
    }
  }

  private async insert(batch: AuditInput[]): Promise<void> {
    const values: unknown[] = [];
    const locations = await Promise.all(
      batch.map((e) => (e.location !== undefined || !e.ip ? e.location : this.locate(e.ip).catch(() => ''))),
    );
    for (const [i, e] of batch.entries()) {
      values.push(
        e.appId,
        e.at,
        e.level ?? 'info',
        text(e.action).slice(0, 64),
        text(e.detail),
        text(e.ip).slice(0, 64),
        text(locations[i]),
        text(e.screen),
        e.actorId ?? null,
        e.resellerId ?? null,
      );
    }
    // Typed placeholders: VALUES rows are otherwise read as text.
    const row = '(?::uuid, ?::timestamptz, ?, ?, ?, ?, ?, ?, ?::uuid, ?::uuid)';
    await this.sql.run(
      `insert into audit_log (app_id, at, level, action, detail, ip, location, screen, actor_id, reseller_id)
       select v.* from (values ${batch.map(() => row).join(',')})
         as v(app_id, at, level, action, detail, ip, location, screen, actor_id, reseller_id)
       -- an entry for an application deleted meanwhile is dropped instead of failing the batch
       where v.app_id is null or exists (select 1 from applications a where a.id = v.app_id)`,
      values,
    );
  }

  async list(q: AuditQuery): Promise<AuditRow[]> {
    await this.flush();
    const where = ['app_id = ?'];
    const params: unknown[] = [q.appId];
    if (q.level) {
      where.push('level = ?');
      params.push(q.level);
    }
    if (q.action) {
      where.push('action = ?');
      params.push(q.action);
    }
    if (q.before) {
      where.push('id < ?');
      params.push(q.before);
    }
    if (q.resellerIds) {
      if (q.resellerIds.length === 0) return [];
      where.push(`reseller_id in (${q.resellerIds.map(() => '?').join(',')})`);
      params.push(...q.resellerIds);
    }
    params.push(q.limit);
    return this.sql.all<AuditRow>(
      `select id::text as id, app_id, at, level, action, detail, ip, location, screen, actor_id, reseller_id
       from audit_log where ${where.join(' and ')} order by id desc limit ?`,
      params,
    );
  }
}
