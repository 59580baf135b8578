// The per-address client-call limits (docs/spec.md "Limits", docs/protocol.md 11.3) of a process without Redis, in
// 12 bytes a tracked address instead of rate-limiter-flexible's memory store (an object, a
// string key and a timer per address: about 250 bytes, so a flood from many addresses grew the
// heap by that much per address and minute). Same rule: a fixed window per key that
// opens at its first call; past `points` in it the call is refused with the time left.
//
// An open-addressing table (linear probing, 40-65% full) of [48-bit hash, calls, window end] in
// one Uint32Array; keys are SipHash-2-4 of the address under a per-process random key, so no one
// can aim collisions (two addresses share a window with probability about n/2^48). Expired
// entries are overwritten in place and dropped when the table is rebuilt. At most `maxKeys`
// addresses are tracked within one window: past that a new address is answered 503 `Service
// unavailable` with Retry-After (a worker cannot serve that many in a minute anyway).
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { AppError } from '../../errors.js';
import type { Coordinator } from '../cluster/coordinator.js';
import { LIMITERS } from '../cluster/names.js';
import { SHORT_HASH_KEY_BYTES, randomBytes, shortHashInto } from '../crypto/index.js';

/** What the client gate needs of a limiter: rate-limiter-flexible's consume() contract. */
export type RequestLimiter = Pick<RateLimiterAbstract, 'consume'> & {
  /** consume() answered at once where the counts are in this process: throws what consume() rejects with. */
  consumeNow?(key: string, points?: number): RateLimiterRes;
};

/** Addresses each limiter tracks at most within one window (1 minute for client calls). */
const MAX_TRACKED_ADDRESSES = 1_000_000;

const MIN_SLOTS = 1024;
/** A slot: [hash bits 0-31, hash bits 32-47 << 16 | calls (saturating at 65,535), window end]. */
const WORDS = 3;
/** The table is rebuilt at this load to 40%: probes stay short, a rebuild pays for 0.25 x slots inserts. */
const MAX_LOAD = 0.65;
const REBUILT_LOAD = 0.4;
/** Window ends are kept in tenths of a second from the limiter's creation (13 years in 32 bits). */
const TICK_MS = 100;
/** Least time between two rebuilds forced by the bound (a rebuild scans the whole table). */
const REBUILD_GAP_TICKS = 10;

interface CompactLimiterOptions {
  points: number;
  /** Window in seconds. */
  duration: number;
  maxKeys?: number;
  now: () => number;
}

export class CompactRateLimiter implements RequestLimiter {
  private readonly hashKey = randomBytes(SHORT_HASH_KEY_BYTES);
  private readonly hash = Buffer.alloc(8);
  private readonly base: number;
  private readonly maxKeys: number;
  private readonly windowTicks: number;
  private table = new Uint32Array(MIN_SLOTS * WORDS);
  /** Slots not empty, live or expired. */
  private occupied = 0;
  /** Open windows at the last rebuild plus new addresses since (an upper bound). */
  private live = 0;
  /** While the table is full of live windows: new addresses are refused until this tick. */
  private fullUntil = 0;
  /** When the table was last rebuilt: once every window of then has closed, it may shrink. */
  private rebuiltAt = 0;

  constructor(private readonly o: CompactLimiterOptions) {
    this.base = o.now();
    this.windowTicks = Math.ceil((o.duration * 1000) / TICK_MS);
    this.maxKeys = o.maxKeys ?? MAX_TRACKED_ADDRESSES;
  }

  /** Addresses whose window is open now (a full scan: for tests and metrics, not the hot path). */
  get size(): number {
    const now = this.tick();
    let n = 0;
    for (let i = 0; i < this.table.length; i += WORDS) if (this.table[i + 2]! > now) n++;
    return n;
  }

  get bytes(): number {
    return this.table.byteLength;
  }

  consume(key: string | number, points = 1): Promise<RateLimiterRes> {
    try {
      return Promise.resolve(this.take(String(key), points));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  consumeNow(key: string, points = 1): RateLimiterRes {
    return this.take(key, points);
  }

  private tick(): number {
    return Math.floor((this.o.now() - this.base) / TICK_MS);
  }

  /** The key's window after `points` more; throws the RateLimiterRes when past the limit (as consume() rejects). */
  private take(key: string, points: number): RateLimiterRes {
    shortHashInto(this.hash, Buffer.from(key), this.hashKey);
    const h0 = this.hash.readUInt32LE(0);
    const hi = (this.hash.readUInt32LE(4) & 0xffff_0000) >>> 0;
    const now = this.tick();
    const found = this.find(h0, hi);
    if (found >= 0 && this.table[found + 2]! > now) {
      const t = this.table;
      const consumed = (t[found + 1]! & 0xffff) + points;
      t[found + 1] = (hi | Math.min(consumed, 0xffff)) >>> 0;
      // The stored end is a tick past the window (below); the wait announced never exceeds the window.
      const msLeft = Math.min((t[found + 2]! - now) * TICK_MS, this.o.duration * 1000);
      const res = new RateLimiterRes(Math.max(this.o.points - consumed, 0), msLeft, consumed, false);
      if (consumed > this.o.points) throw res;
      return res;
    }
    // claim() may rebuild the table: read it only afterwards.
    const slot = found >= 0 ? found : this.claim(h0, now);
    const t = this.table;
    t[slot] = h0;
    t[slot + 1] = (hi | Math.min(points, 0xffff)) >>> 0;
    // +1: a window never ends before its full duration (ticks are whole tenths).
    t[slot + 2] = now + this.windowTicks + 1;
    const res = new RateLimiterRes(Math.max(this.o.points - points, 0), this.o.duration * 1000, points, true);
    if (points > this.o.points) throw res;
    return res;
  }

  /** The key's slot (an offset into the table), or -1. */
  private find(h0: number, hi: number): number {
    const t = this.table;
    const slots = t.length / WORDS;
    for (let i = h0 % slots; ; i = i + 1 === slots ? 0 : i + 1) {
      const s = i * WORDS;
      if (t[s + 2] === 0) return -1;
      if (t[s] === h0 && (t[s + 1]! & 0xffff_0000) >>> 0 === hi) return s;
    }
  }

  /** A slot for a new key: the first expired one on its probe, else an empty one (growing first). */
  private claim(h0: number, now: number): number {
    if (now < this.fullUntil) throw this.full(now);
    // `live` counts up from the last rebuild (expiries are only seen by a rebuild), so at the bound
    // a rebuild recounts; expired slots are reused in place, so after a flood the table keeps its
    // size until a rebuild, which runs at least once a window to shrink it.
    const atBound = this.live >= this.maxKeys;
    const stale = this.table.length > MIN_SLOTS * WORDS && now - this.rebuiltAt > this.windowTicks;
    if (atBound || stale || this.occupied + 1 > (this.table.length / WORDS) * MAX_LOAD) {
      // A rebuild is a full scan: at the bound, at most one a second.
      if (atBound && now - this.rebuiltAt < REBUILD_GAP_TICKS) {
        this.fullUntil = this.rebuiltAt + REBUILD_GAP_TICKS;
        throw this.full(now);
      }
      const soonest = this.rebuild(now);
      if (this.live >= this.maxKeys) {
        this.fullUntil = Math.max(soonest, now + REBUILD_GAP_TICKS);
        throw this.full(now);
      }
    }
    this.live++;
    const t = this.table;
    const slots = t.length / WORDS;
    for (let i = h0 % slots; ; i = i + 1 === slots ? 0 : i + 1) {
      const s = i * WORDS;
      if (t[s + 2] === 0) {
        this.occupied++;
        return s;
      }
      if (t[s + 2]! <= now) return s;
    }
  }

  /** Keeps the open windows only, in a table 40% full; returns the tick the first of them ends. */
  private rebuild(now: number): number {
    const old = this.table;
    let live = 0;
    let soonest = Infinity;
    for (let s = 0; s < old.length; s += WORDS) {
      if (old[s + 2]! > now) {
        live++;
        soonest = Math.min(soonest, old[s + 2]!);
      }
    }
    const slots = Math.max(MIN_SLOTS, Math.ceil((Math.min(live, this.maxKeys) + 1) / REBUILT_LOAD));
    const t = new Uint32Array(slots * WORDS);
    for (let s = 0; s < old.length; s += WORDS) {
      if (old[s + 2]! <= now) continue;
      let i = old[s]! % slots;
      while (t[i * WORDS + 2] !== 0) i = i + 1 === slots ? 0 : i + 1;
      t.set(old.subarray(s, s + WORDS), i * WORDS);
    }
    this.table = t;
    this.occupied = live;
    this.live = live;
    this.rebuiltAt = now;
    return soonest;
  }

  private full(now: number): AppError {
    const s = Math.max(1, Math.ceil(((this.fullUntil - now) * TICK_MS) / 1000));
    return new AppError('unavailable', undefined, { 'Retry-After': String(s) });
  }
}

/**
 * A per-address limit of `points` calls a minute: alone, a compact in-process table; in a cluster,
 * the coordinator's (Redis), shared by every worker.
 */
export function addressLimiter(
  coordinator: Pick<Coordinator, 'kind' | 'limiter'>,
  now: () => number,
  name: string,
  points: number,
): RequestLimiter {
  return coordinator.kind === 'local'
    ? new CompactRateLimiter({ points, duration: 60, now })
    : coordinator.limiter({ keyPrefix: LIMITERS.requests(name), points, duration: 60 });
}
