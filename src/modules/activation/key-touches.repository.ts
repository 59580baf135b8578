// Write-behind for the last-login and IP of keys that are already activated (a `license` call on a
// used key whose HWID is already bound). The answer to the client does not depend on these two
// columns, so the call is acknowledged once the touch is queued; touches are coalesced per key
// (the latest wins) and written as one UPDATE per event-loop turn. Nothing is dropped: a failed
// write keeps its touches for the next turn (newer touches of the same key supersede them), and
// past MAX_PENDING distinct keys a caller waits for the queue to drain instead of growing it.
// close() writes what is left (shutdown order: after the last request, before the pool closes).
import type { Logger } from 'pino';
import type { Sql } from '../../platform/db/sql.js';

interface KeyTouch {
  ip: string;
  at: Date;
}

/** Distinct keys queued before callers wait for a flush (backpressure, never a drop). */
const MAX_PENDING_TOUCHES = 10_000;
/** Keys per UPDATE statement (PostgreSQL allows 65,535 bind parameters; three per key). */
const MAX_BATCH = 2_000;
const RETRY_MS = 500;

export class KeyTouchesRepository {
  private pending = new Map<string, KeyTouch>();
  private flushing: Promise<void> | undefined;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  /** Queued and not yet written (tests and metrics). */
  get size(): number {
    return this.pending.size;
  }

  /** Queues a touch; resolves at once unless the queue is full, then once it has drained. */
  async touch(licenseId: string, t: KeyTouch): Promise<void> {
    while (this.pending.size >= MAX_PENDING_TOUCHES && !this.pending.has(licenseId)) await this.flush();
    this.pending.set(licenseId, t);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush().catch(() => undefined));
    }
  }

  /** Writes everything queued so far; rejects when the database refused (the touches stay queued). */
  flush(): Promise<void> {
    this.scheduled = false;
    this.flushing ??= this.drain().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async drain(): Promise<void> {
    while (this.pending.size > 0) {
      const batch = [...this.pending].slice(0, MAX_BATCH);
      for (const [id] of batch) this.pending.delete(id);
      try {
        await this.write(batch);
      } catch (err) {
        // Put back what was not written unless a newer touch of the same key arrived meanwhile.
        for (const [id, t] of batch) if (!this.pending.has(id)) this.pending.set(id, t);
        this.log.warn({ err, keys: batch.length }, 'license.touch_write_failed');
        this.retryLater();
        throw err;
      }
    }
  }

  private retryLater(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flush().catch(() => undefined);
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  private async write(batch: [string, KeyTouch][]): Promise<void> {
    const values: unknown[] = [];
    for (const [id, t] of batch) values.push(id, t.at, t.ip);
    // Only keys still used are touched; a key banned or deleted meanwhile keeps its columns.
    await this.sql.run(
      `update license_keys k set last_login = v.at, ip = v.ip
       from (values ${batch.map(() => '(?::uuid, ?::timestamptz, ?)').join(',')}) as v(id, at, ip)
       where k.id = v.id and k.status = 'used'`,
      values,
    );
  }

  /** Writes what is queued, retrying a failed write until `deadlineMs` has passed. */
  async close(deadlineMs = 5_000): Promise<void> {
    const end = Date.now() + deadlineMs;
    for (;;) {
      try {
        await this.flush();
        break;
      } catch {
        if (Date.now() > end) {
          this.log.error({ keys: this.pending.size }, 'license.touches_lost_at_shutdown');
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }
}
