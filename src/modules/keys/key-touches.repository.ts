// Write-behind for the last-login and IP of keys that are already activated (a `license` call on a
// used key whose HWID is already bound) and the last-seen of a key's device it already holds. The
// answer to the client does not depend on these columns, so the call is acknowledged once the
// touch is queued; touches are coalesced per key and per device (the latest wins) and written as
// one prepared UPDATE each per event-loop turn. Nothing is dropped: a failed
// write keeps its touches for the next turn (newer touches of the same key supersede them), and
// past MAX_PENDING distinct keys a caller waits for the queue to drain instead of growing it.
// close() writes what is left (shutdown order: after the last request, before the pool closes).
import type { Logger } from 'pino';
import type { Sql } from '../../platform/db/sql.js';

interface KeyTouch {
  ip: string;
  at: Date;
}

interface DeviceTouch {
  licenseId: string;
  hwid: string;
  at: Date;
}

/** Distinct keys and devices queued before callers wait for a flush (backpressure, never a drop). */
const MAX_PENDING_TOUCHES = 10_000;
/** Rows per UPDATE statement (each column travels as one array parameter). */
const MAX_BATCH = 2_000;
const RETRY_MS = 500;

export class KeyTouchesRepository {
  private pending = new Map<string, KeyTouch>();
  /** By license id and HWID (a NUL between them: neither can hold one). */
  private devices = new Map<string, DeviceTouch>();
  private flushing: Promise<void> | undefined;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  /** Queued and not yet written (tests and metrics). */
  get size(): number {
    return this.pending.size + this.devices.size;
  }

  /** Queues a touch; resolves at once unless the queue is full, then once it has drained. */
  async touch(licenseId: string, t: KeyTouch): Promise<void> {
    while (this.size >= MAX_PENDING_TOUCHES && !this.pending.has(licenseId)) await this.flush();
    this.pending.set(licenseId, t);
    this.schedule();
  }

  /** Queues the last-seen of a device the key already holds (a device it does not hold is left alone). */
  async seen(licenseId: string, hwid: string, at: Date): Promise<void> {
    const id = `${licenseId}\0${hwid}`;
    while (this.size >= MAX_PENDING_TOUCHES && !this.devices.has(id)) await this.flush();
    this.devices.set(id, { licenseId, hwid, at });
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => void this.flush().catch(() => undefined));
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
    while (this.size > 0) {
      const keys = take(this.pending);
      const devices = take(this.devices);
      try {
        await this.write(keys, devices);
      } catch (err) {
        // Put back what was not written unless a newer touch of the same key or device arrived meanwhile.
        for (const [id, t] of keys) if (!this.pending.has(id)) this.pending.set(id, t);
        for (const [id, t] of devices) if (!this.devices.has(id)) this.devices.set(id, t);
        this.log.warn({ err, keys: keys.length, devices: devices.length }, 'license.touch_write_failed');
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

  private async write(keys: [string, KeyTouch][], devices: [string, DeviceTouch][]): Promise<void> {
    // Only keys still used are touched; a key banned or deleted meanwhile keeps its columns.
    if (keys.length > 0)
      await this.sql.prepared(
        `update license_keys k set last_login = v.at, ip = v.ip
         from unnest($1::uuid[], $2::timestamptz[], $3::text[]) as v(id, at, ip)
         where k.id = v.id and k.status = 'used'`,
        [keys.map(([id]) => id), keys.map(([, t]) => t.at), keys.map(([, t]) => t.ip)],
      );
    if (devices.length > 0)
      await this.sql.prepared(
        `update key_devices d set last_seen = v.at
         from unnest($1::uuid[], $2::text[], $3::timestamptz[]) as v(id, hwid, at)
         where d.license_id = v.id and d.hwid = v.hwid`,
        [devices.map(([, t]) => t.licenseId), devices.map(([, t]) => t.hwid), devices.map(([, t]) => t.at)],
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

/** Removes and returns up to MAX_BATCH entries, oldest first. */
function take<T>(from: Map<string, T>): [string, T][] {
  const out: [string, T][] = [];
  for (const entry of from) {
    if (out.length >= MAX_BATCH) break;
    out.push(entry);
  }
  for (const [id] of out) from.delete(id);
  return out;
}
