// Expiry while running (docs/protocol.md "Expiry while running"): a live heartbeat session ends when
// its key, or its end user, reaches `expires_at`. One worker of the deployment (the holder of shard
// 0's lease, every worker in turn as leases move) reads the keys and users whose expiry passed since
// its last look, four times a second, and publishes `license.expire` / `user.expire` on the event bus.
// Every worker then ends the sessions it owns as a kill with the reason `expired` (heartbeat.owner)
// and pushes `revoked` with reason `expired` to its channel clients (realtime).
//
// Why a scan and not a deadline per session: an expiry changes (extend, PATCH, a user's own date)
// after the session started; the database holds the one current value, so nothing can go stale.
import type { Logger } from 'pino';
import type { EventBus } from '../notify/index.js';

/** How often the leader looks; a session ends within this much (plus the event's delivery) of its expiry. */
const EXPIRY_SCAN_MS = 250;
/**
 * How far back the first look of a new leader reaches: a key that expired while no worker was
 * looking (a restart, a lease moving) still ends the sessions that outlived it.
 */
const EXPIRY_LOOKBACK_MS = 60 * 60 * 1000;

/** A key (activated, not lifetime) or end user whose expiry fell in a window; the owner's port. */
interface ExpiredRecord {
  id: string;
  app_id: string;
  reseller_id: string | null;
}

interface ExpirySource {
  /** Records with `from <= expires_at < to`, at most `limit` of them, oldest expiry first. */
  expiredBetween(from: Date, to: Date, limit: number): Promise<(ExpiredRecord & { expires_at: Date })[]>;
}

interface ExpiryWatchDeps {
  now: () => number;
  log: Logger;
  events: Pick<EventBus, 'publish'>;
  keys: ExpirySource;
  users: ExpirySource;
  /** Whether this worker is the one that looks now. */
  isLeader: () => boolean;
}

/** Rows read per look; a larger backlog is taken over the next looks (the window resumes after the last one). */
const BATCH = 1000;

export class ExpiryWatch {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** Where the next look starts, per source; undefined until this worker leads. */
  private from: { keys: number; users: number } | undefined;
  /** Records of the last look's final instant, so a batch cut there is not published twice. */
  private seen = { keys: new Set<string>(), users: new Set<string>() };

  constructor(private readonly d: ExpiryWatchDeps) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), EXPIRY_SCAN_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look, on the timer. */
  private async tick(): Promise<void> {
    if (this.running) return;
    if (!this.d.isLeader()) {
      this.from = undefined; // a later lead looks back again: another worker may have missed a moment
      return;
    }
    this.running = true;
    try {
      const now = this.d.now();
      this.from ??= { keys: now - EXPIRY_LOOKBACK_MS, users: now - EXPIRY_LOOKBACK_MS };
      this.from.keys = await this.look('keys', 'license.expire', this.from.keys, now);
      this.from.users = await this.look('users', 'user.expire', this.from.users, now);
    } catch (err) {
      this.d.log.warn({ err }, 'heartbeat.expiry_watch_failed'); // the same window is read again next time
    } finally {
      this.running = false;
    }
  }

  private async look(
    source: 'keys' | 'users',
    kind: 'license.expire' | 'user.expire',
    from: number,
    now: number,
  ): Promise<number> {
    const rows = await this.d[source].expiredBetween(new Date(from), new Date(now), BATCH);
    const seen = this.seen[source];
    // A full batch may stop inside one instant: the next look starts at that instant again and
    // skips what it published already; otherwise everything before `now` is done.
    const next = rows.length === BATCH ? rows[rows.length - 1]!.expires_at.getTime() : now;
    const atNext = new Set<string>();
    for (const r of rows) {
      const at = r.expires_at.getTime();
      if (at === next) atNext.add(r.id);
      if (seen.has(r.id)) continue;
      const data = {
        [source === 'keys' ? 'license_id' : 'user_id']: r.id,
        reason: 'expired',
        expires_at: r.expires_at.toISOString(),
      };
      await this.d.events.publish(kind, r.app_id, data, r.reseller_id);
    }
    this.seen[source] = atNext;
    return next;
  }
}
