// Accepted heartbeats per application and UTC hour, for the beats chart. Beats are not audited one by
// one; the worker that accepts a beat adds one to an in-memory count (a Map increment, no promise on
// the beat's path), keyed by the session's key and user, and every flush adds what it counted to
// `beat_counts` (the keys module's table) with one upsert. The reseller a row belongs to is read from the key (or the user) at
// flush time, so the chart is scoped like the other counts. Every worker flushes its own counts;
// concurrent upserts add up (`beats = beat_counts.beats + excluded.beats`). A failed write keeps its
// counts for the next flush; counts of an application deleted meanwhile are dropped.
import type { Logger } from 'pino';

const HOUR_MS = 3_600_000;
/** Rows per INSERT (PostgreSQL allows 65,535 bind parameters; five per row). */
const MAX_BATCH = 5_000;
/** Distinct (app, key, user, hour) counts held before a flush is started early. */
const FLUSH_AT = 20_000;

/** Beats counted for one application, key, user and UTC hour (ms). */
interface BeatCount {
  appId: string;
  licenseId: string | null;
  userId: string | null;
  hour: number;
  n: number;
}

export class BeatCounts {
  private pending = new Map<string, BeatCount>();
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The keys module's beat_counts: adds a batch of counts, each under its key's (or user's) reseller. */
    private readonly store: { addBeats(batch: readonly BeatCount[]): Promise<void> },
    private readonly log: Logger,
  ) {}

  /** Counted and not yet written (tests and metrics). */
  get size(): number {
    return this.pending.size;
  }

  /** One accepted beat at `at` (ms). Synchronous: the beat's answer never waits on this. */
  count(appId: string, licenseId: string | null, userId: string | null, at: number): void {
    const hour = Math.floor(at / HOUR_MS) * HOUR_MS;
    const k = `${appId}|${licenseId ?? ''}|${userId ?? ''}|${hour}`;
    const p = this.pending.get(k);
    if (p) p.n++;
    else {
      this.pending.set(k, { appId, licenseId, userId, hour, n: 1 });
      if (this.pending.size === FLUSH_AT) void this.flush().catch(() => undefined);
    }
  }

  /** Flushes every `everyMs` until close(). */
  start(everyMs: number): void {
    this.timer ??= setInterval(() => void this.flush().catch(() => undefined), everyMs);
    this.timer.unref();
  }

  /** Adds everything counted so far to the table; rejects when the database refused (the counts stay). */
  flush(): Promise<void> {
    this.flushing ??= this.drain().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async drain(): Promise<void> {
    while (this.pending.size > 0) {
      const taken: string[] = [];
      const batch: BeatCount[] = [];
      for (const [k, p] of this.pending) {
        if (batch.length === MAX_BATCH) break;
        taken.push(k);
        batch.push(p);
      }
      for (const k of taken) this.pending.delete(k);
      try {
        await this.store.addBeats(batch);
      } catch (err) {
        // Put the counts back, adding to what was counted meanwhile.
        for (let i = 0; i < batch.length; i++) {
          const b = batch[i]!;
          const now = this.pending.get(taken[i]!);
          if (now) now.n += b.n;
          else this.pending.set(taken[i]!, b);
        }
        this.log.warn({ err, rows: batch.length }, 'heartbeat.beat_counts_write_failed');
        throw err;
      }
    }
  }

  /** Stops the timer and writes what is left, retrying a failed write until `deadlineMs` has passed. */
  async close(deadlineMs = 5_000): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    const end = Date.now() + deadlineMs;
    for (;;) {
      try {
        await this.flush();
        return;
      } catch {
        if (Date.now() > end) {
          this.log.error({ rows: this.pending.size }, 'heartbeat.beat_counts_lost_at_shutdown');
          return;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}
