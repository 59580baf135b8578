// Audit log. Client calls write one entry each, so writes are batched: entries queue and are
// flushed as one multi-row INSERT on the next turn of the event loop (or at 500 entries).
// Readers in this process call flush() first, so a request sees the entries written before it.
// A database outage loses nothing (docs/protocol.md 11.29): a batch the database could not take goes back
// to the front of the queue and is tried again with backoff; the queue is bounded (MAX_QUEUED), and
// what overflows it during a long outage is counted (`dropped`, in /metrics) and logged.
import type { Logger } from 'pino';
import type { AuditLevel } from '../../platform/db/entities/index.js';
import type { Actor } from '../access/index.js';
import type { Sql } from '../../platform/db/sql.js';
import { infrastructureError } from '../../errors.js';

interface AuditInput {
  appId: string | null;
  action: string;
  level?: AuditLevel;
  detail?: string;
  ip?: string;
  location?: string;
  screen?: string;
  /** Who did it (every dashboard write names one, docs/protocol.md 13.3); client calls have none. */
  actor?: Actor;
  /** The browser of a dashboard sign-in. */
  userAgent?: string;
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
  actor_username: string | null;
  actor_role: string | null;
  token_id: string | null;
  user_agent: string | null;
  reseller_id: string | null;
  /** The actor's account is gone (docs/protocol.md 11.32). */
  actor_deleted: boolean;
}

interface AuditQuery {
  appId: string;
  level?: string | undefined;
  action?: string | undefined;
  /** Only entries of this actor (username, case-insensitive). */
  actor?: string | undefined;
  /** Text in the detail or the actor's username (case-insensitive). */
  q?: string | undefined;
  /** Entries at or after / before this time. */
  from?: Date | undefined;
  to?: Date | undefined;
  limit: number;
  before?: string | undefined;
  /** Only entries whose reseller_id is one of these (reseller scoping); undefined: all. */
  resellerIds?: readonly string[] | undefined;
}

/** Entries of the account audit: account-level actions (no application) by the listed actors. */
interface AccountAuditQuery {
  /** undefined: every actor (developers). */
  actorIds: readonly string[] | undefined;
  action?: string | undefined;
  /** Any of these actions. */
  actions?: readonly string[];
  actor?: string | undefined;
  limit: number;
  before?: string | undefined;
}

const COLUMNS = `id::text as id, app_id, at, level, action, detail, ip, location, screen, actor_id, actor_username,
  actor_role, token_id, user_agent, reseller_id,
  (actor_id is not null and not exists (select 1 from accounts a where a.id = audit_log.actor_id)) as actor_deleted`;

/**
 * Listings run newest first by (at, id); `before` is the id of the last entry seen and stands for its
 * (at, id) position, so paging reaches every entry once even where times are equal or ids and times
 * disagree (an entry queued early is flushed late).
 */
const BEFORE = '(at, id) < (select b.at, b.id from audit_log b where b.id = ?)';
const NEWEST_FIRST = 'order by audit_log.at desc, audit_log.id desc';

const MAX_BATCH = 500;
/** Entries kept while the database is unreachable; past it the oldest are dropped and counted. */
const MAX_QUEUED = 100_000;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

/** PostgreSQL text cannot hold U+0000: an entry quoting client input keeps it readable instead of failing. */
/** ES2024's String.prototype.isWellFormed/toWellFormed (Node 20 has them; the compiler's lib is older). */
type WellFormed = { isWellFormed(): boolean; toWellFormed(): string };

/**
 * Free text as PostgreSQL stores it: U+0000 and lone surrogates (JSON.parse lets a client send
 * either) become U+FFFD, as UTF-8 encoding would turn the surrogates anyway; left in, the batch's
 * JSON would not convert to text and the entry would be lost.
 */
function text(v: string | undefined, max?: number): string {
  if (v === undefined) return '';
  // Cut before mending: a cut through a surrogate pair leaves a lone one.
  const cut = max !== undefined && v.length > max ? v.slice(0, max) : v;
  const s = cut.includes('\0') ? cut.replaceAll('\0', '\uFFFD') : cut;
  return (s as unknown as WellFormed).isWellFormed() ? s : (s as unknown as WellFormed).toWellFormed();
}

export class AuditRepository {
  private queue: AuditInput[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** While the database is unreachable: the pending retry and its current delay. */
  private retry: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  /** Entries dropped because the queue overflowed during an outage. */
  dropped = 0;

  /**
   * `locate` turns an entry's IP into its Location column (docs/spec.md "Log entry") when the writer gave
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
    if (this.queue.length > MAX_QUEUED) {
      const over = this.queue.length - MAX_QUEUED;
      this.queue.splice(0, over);
      if (this.dropped === 0 || this.dropped % 10_000 < over)
        this.log.error({ dropped: this.dropped + over }, 'audit.queue_overflow: oldest entries dropped');
      this.dropped += over;
    }
    if (this.retry) return; // waiting for the database: the retry takes everything queued
    if (this.queue.length >= MAX_BATCH) void this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  /**
   * Writes everything queued so far; resolves when it is in the database, or, during an outage, once
   * the database refused it (the entries stay queued for the retry).
   */
  flush(): Promise<void> {
    this.scheduled = false;
    if (this.queue.length === 0) return this.flushing;
    // One INSERT at a time, and each takes what queued up meanwhile: under load a flush per event
    // loop turn chained thousands of INSERTs of a few rows, which fell behind and held every
    // waiting entry in memory (over 1 KB per heartbeat session set up at full speed).
    this.flushing = this.flushing.then(async () => {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        if (!(await this.insertBatch(batch))) {
          this.queue.unshift(...batch);
          this.scheduleRetry();
          return;
        }
      }
      if (this.retryMs > RETRY_MIN_MS) this.log.info('audit.recovered: queued entries written');
      this.retryMs = RETRY_MIN_MS;
    });
    return this.flushing;
  }

  private scheduleRetry(): void {
    if (this.retry) return;
    if (this.retryMs === RETRY_MIN_MS) this.log.warn({ queued: this.queue.length }, 'audit.database_unavailable');
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.flush();
    }, this.retryMs);
    this.retry.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  /** Entries waiting to be written (metrics). */
  get queued(): number {
    return this.queue.length;
  }

  /** Stops retrying (shutdown); what is still queued then is logged as lost. */
  close(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    if (this.queue.length > 0) this.log.error({ lost: this.queue.length }, 'audit.unwritten_at_shutdown');
  }

  /**
   * One multi-row INSERT; should it fail, the entries go in one at a time, so an entry the database
   * refuses costs only itself and never the valid entries that shared its batch. False: the database
   * is unreachable, nothing of the batch was written.
   */
  private async insertBatch(batch: AuditInput[]): Promise<boolean> {
    try {
      await this.insert(batch);
      return true;
    } catch (err) {
      if (infrastructureError(err)?.code === 'unavailable') return false;
      if (batch.length === 1) {
        this.log.error({ err, action: batch[0]!.action }, 'audit.write_failed');
        return true;
      }
      this.log.warn({ err, size: batch.length }, 'audit.batch_failed_retrying_singly');
      for (const [i, e] of batch.entries()) {
        if (!(await this.insertBatch([e]))) {
          // The database went away midway: the rest waits for it with the queue.
          this.queue.unshift(...batch.slice(i));
          return true;
        }
      }
      return true;
    }
  }

  private async insert(batch: AuditInput[]): Promise<void> {
    const locations = await Promise.all(
      batch.map((e) => {
        const ip = e.ip ?? e.actor?.ip;
        return e.location !== undefined || !ip ? e.location : this.locate(ip).catch(() => '');
      }),
    );
    // The batch travels as one JSON array of rows (JSON.stringify is native; pg's array encoding
    // escapes every element in JavaScript), and the statement's text is the same for every batch,
    // so it is prepared once per connection.
    const rows = batch.map((e, i) => [
      e.appId,
      e.at,
      e.level ?? 'info',
      text(e.action, 64),
      text(e.detail),
      text(e.ip ?? e.actor?.ip, 64),
      text(locations[i]),
      text(e.screen),
      e.actor?.id ?? null,
      e.actor ? text(e.actor.username, 32) : null,
      e.actor?.role ?? null,
      e.actor?.tokenId ?? null,
      e.userAgent === undefined ? null : text(e.userAgent, 256),
      e.resellerId ?? null,
    ]);
    await this.sql.prepared(
      `insert into audit_log (app_id, at, level, action, detail, ip, location, screen, actor_id, actor_username,
         actor_role, token_id, user_agent, reseller_id)
       select (r->>0)::uuid, (r->>1)::timestamptz, r->>2, r->>3, r->>4, r->>5, r->>6, r->>7, (r->>8)::uuid, r->>9,
         r->>10, (r->>11)::uuid, r->>12, (r->>13)::uuid
       from jsonb_array_elements($1::jsonb) as r
       -- an entry for an application deleted meanwhile is dropped instead of failing the batch
       where r->>0 is null or exists (select 1 from applications a where a.id = (r->>0)::uuid)`,
      [JSON.stringify(rows)],
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
    if (q.actor) {
      where.push('lower(actor_username) = lower(?)');
      params.push(q.actor);
    }
    if (q.q) {
      where.push('(detail ilike ? or actor_username ilike ?)');
      const like = `%${q.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      params.push(like, like);
    }
    if (q.from) {
      where.push('at >= ?');
      params.push(q.from);
    }
    if (q.to) {
      where.push('at <= ?');
      params.push(q.to);
    }
    if (q.before) {
      where.push(BEFORE);
      params.push(q.before);
    }
    if (q.resellerIds) {
      if (q.resellerIds.length === 0) return [];
      where.push(`reseller_id in (${q.resellerIds.map(() => '?').join(',')})`);
      params.push(...q.resellerIds);
    }
    params.push(q.limit);
    // `audit_log.id`, not `id`: the bare name would bind to the text alias (ids sorted as text).
    return this.sql.all<AuditRow>(
      `select ${COLUMNS} from audit_log where ${where.join(' and ')} ${NEWEST_FIRST} limit ?`,
      params,
    );
  }

  /** Account-level entries (no application), newest first (GET /api/audit, docs/protocol.md 13.3). */
  async listAccount(q: AccountAuditQuery): Promise<AuditRow[]> {
    await this.flush();
    const where = ['app_id is null', 'actor_id is not null'];
    const params: unknown[] = [];
    if (q.actorIds) {
      if (q.actorIds.length === 0) return [];
      where.push('actor_id = any(?::uuid[])');
      params.push(`{${q.actorIds.join(',')}}`);
    }
    if (q.action) {
      where.push('action = ?');
      params.push(q.action);
    }
    if (q.actions) {
      where.push(`action in (${q.actions.map(() => '?').join(',')})`);
      params.push(...q.actions);
    }
    if (q.actor) {
      where.push('lower(actor_username) = lower(?)');
      params.push(q.actor);
    }
    if (q.before) {
      where.push(BEFORE);
      params.push(q.before);
    }
    params.push(q.limit);
    return this.sql.all<AuditRow>(
      `select ${COLUMNS} from audit_log where ${where.join(' and ')} ${NEWEST_FIRST} limit ?`,
      params,
    );
  }
}
