// Response keys of unactivated sessions opened with an enc_key (docs/protocol.md 5): the one thing a
// sealed session token (session-token.ts) cannot carry. Kept until the session's 24 hours end,
// under a bound (CLIENT_SESSION_LIMIT): past it `init` with an enc_key answers 503 with
// Retry-After instead of growing without limit. Activation writes the session's own record
// (client-sessions.ts), which carries the key from then on.
//
// One process (no Redis): CompactKeyStore, 40 bytes a session plus a 4-byte index slot 40-65%
// full, in a few large buffers: no object, string or timer per session. With Redis: one small
// key per session there, and this worker counts what it opened in the last 24 hours.
import { AppError } from '../../errors.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { KEYS } from '../../platform/cluster/names.js';

/** Longest Retry-After a full store answers: a slot frees when any older session expires. */
const FULL_RETRY_AFTER_MAX_S = 300;

export interface UnactivatedKeys {
  /** Throws 503 `Service unavailable` (Retry-After) when the bound is reached. */
  ensureRoom(): void;
  /**
   * Keeps `key` for the token until createdAt + ttl. False when another live token has the same
   * fingerprint (the caller draws another token); throws 503 past the bound.
   */
  put(token: string, key: Buffer, createdAt: number): Promise<boolean>;
  get(token: string): Promise<Buffer | null>;
  /** Keys counted against the bound now. */
  readonly size: number;
}

function full(retryAfterMs: number): AppError {
  const s = Math.min(FULL_RETRY_AFTER_MAX_S, Math.max(1, Math.ceil(retryAfterMs / 1000)));
  return new AppError('unavailable', undefined, { 'Retry-After': String(s) });
}

// ---- one process ---------------------------------------------------------------------------

const CHUNK_RECORDS = 4096;
/** fingerprint (8) | response key (32) */
const RECORD_BYTES = 40;
const MIN_INDEX_SLOTS = 1024;
/** The index is rebuilt at this load to 1/REBUILT_LOAD... */
const MAX_LOAD = 0.65;
/** ...of this: linear probing stays short, and a rebuild pays for itself over 0.25 x slots inserts. */
const REBUILT_LOAD = 0.4;
/** Index slots hold (sequence mod M) + 1; 0 is an empty slot. */
const M = 0xffff_ffff;

/**
 * A FIFO of 40-byte records in 4096-record chunks, found through an open-addressing index of
 * 4-byte slots (linear probing, at most 65% full) keyed by the token's first 8 bytes. Every session
 * lives the same 24 hours, so they expire in the order they were opened: a chunk is dropped whole
 * once its newest record has expired (a record may outlive its session by the time its chunk took
 * to fill; the session itself ends on its token's own time). The first 8 bytes of a token are
 * already pseudorandom (its tag and ciphertext), and put() refuses a fingerprint that is live, so a
 * fingerprint names exactly one live record; only tokens whose tag verified are looked up.
 */
export class CompactKeyStore implements UnactivatedKeys {
  private chunks: Buffer[] = [];
  /** Newest createdAt (ms) written into each chunk. */
  private newest: number[] = [];
  /** Sequence number of chunks[0]'s first record: records [base, tail) are kept. */
  private base = 0;
  private tail = 0;
  private index = new Uint32Array(MIN_INDEX_SLOTS);
  /** Index slots not empty (live or dead). */
  private occupied = 0;

  constructor(
    private readonly limit: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  get size(): number {
    this.expire();
    return this.tail - this.base;
  }

  /** Bytes held, for the documentation's arithmetic and the tests. */
  get bytes(): number {
    return this.chunks.length * CHUNK_RECORDS * RECORD_BYTES + this.index.byteLength;
  }

  ensureRoom(): void {
    this.expire();
    if (this.tail - this.base < this.limit) return;
    throw full(this.newest[0]! + this.ttlMs - this.now());
  }

  async put(token: string, key: Buffer, createdAt: number): Promise<boolean> {
    this.ensureRoom();
    const t = Buffer.from(token, 'base64url');
    const fp0 = t.readUInt32LE(0);
    const fp1 = t.readUInt32LE(4);
    if (this.find(fp0, fp1) >= 0) return false;
    const seq = this.tail;
    if (seq - this.base >= this.chunks.length * CHUNK_RECORDS) {
      this.chunks.push(Buffer.alloc(CHUNK_RECORDS * RECORD_BYTES));
      this.newest.push(createdAt);
    }
    const [chunk, off] = this.at(seq);
    chunk.writeUInt32LE(fp0, off);
    chunk.writeUInt32LE(fp1, off + 4);
    key.copy(chunk, off + 8, 0, 32);
    const last = this.newest.length - 1;
    this.newest[last] = Math.max(this.newest[last]!, createdAt);
    this.tail++;
    this.insert(seq, fp0);
    return true;
  }

  async get(token: string): Promise<Buffer | null> {
    this.expire();
    const t = Buffer.from(token, 'base64url');
    if (t.byteLength < 8) return null;
    const seq = this.find(t.readUInt32LE(0), t.readUInt32LE(4));
    if (seq < 0) return null;
    const [chunk, off] = this.at(seq);
    return Buffer.from(chunk.subarray(off + 8, off + 40));
  }

  private at(seq: number): [Buffer, number] {
    const i = seq - this.base;
    return [this.chunks[Math.floor(i / CHUNK_RECORDS)]!, (i % CHUNK_RECORDS) * RECORD_BYTES];
  }

  /** Drops the oldest chunks whose every record is past its 24 hours. */
  private expire(): void {
    const cutoff = this.now() - this.ttlMs;
    while (this.chunks.length > 0 && this.newest[0]! <= cutoff) {
      this.chunks.shift();
      this.newest.shift();
      this.base = Math.min(this.tail, this.base + CHUNK_RECORDS);
    }
    if (this.chunks.length === 0 && this.index.length > MIN_INDEX_SLOTS) {
      // Nothing kept (after a flood, say): give a grown index back too.
      this.base = this.tail;
      this.index = new Uint32Array(MIN_INDEX_SLOTS);
      this.occupied = 0;
    }
  }

  /** The kept sequence an index slot names, or -1 (empty slots are 0, dead ones are out of range). */
  private live(v: number): number {
    if (v === 0 || this.tail === 0) return -1;
    const last = this.tail - 1;
    const seq = last - ((((last - (v - 1)) % M) + M) % M);
    return seq >= this.base ? seq : -1;
  }

  private find(fp0: number, fp1: number): number {
    const slots = this.index.length;
    for (let i = fp0 % slots; ; i = i + 1 === slots ? 0 : i + 1) {
      const v = this.index[i]!;
      if (v === 0) return -1;
      const seq = this.live(v);
      if (seq >= 0) {
        const [chunk, off] = this.at(seq);
        if (chunk.readUInt32LE(off) === fp0 && chunk.readUInt32LE(off + 4) === fp1) return seq;
      }
    }
  }

  /** Writes `seq` into the first empty or dead slot of its probe (find() has ruled out a live twin). */
  private insert(seq: number, fp0: number): void {
    const slots = this.index.length;
    let i = fp0 % slots;
    for (;;) {
      const v = this.index[i]!;
      if (v === 0) {
        this.occupied++;
        break;
      }
      if (this.live(v) < 0) break;
      i = i + 1 === slots ? 0 : i + 1;
    }
    this.index[i] = (seq % M) + 1;
    if (this.occupied > slots * MAX_LOAD) this.rebuild();
  }

  /** Re-indexes the kept records into a table 40% full (grown or shrunk), dropping dead slots. */
  private rebuild(): void {
    this.expire();
    const kept = this.tail - this.base;
    const slots = Math.max(MIN_INDEX_SLOTS, Math.ceil(kept / REBUILT_LOAD));
    this.index = new Uint32Array(slots);
    this.occupied = 0;
    for (let seq = this.base; seq < this.tail; seq++) {
      const [chunk, off] = this.at(seq);
      let i = chunk.readUInt32LE(off) % slots;
      while (this.index[i] !== 0) i = i + 1 === slots ? 0 : i + 1;
      this.index[i] = (seq % M) + 1;
      this.occupied++;
    }
  }
}

// ---- a cluster (Redis) ---------------------------------------------------------------------

const BUCKET_MS = 10 * 60 * 1000;

/**
 * Sessions this worker opened within the last `ttlMs`, in 10-minute buckets: a count that can
 * only overstate (a bucket leaves whole), which is the safe side of a bound.
 */
class OpenedCounter {
  private readonly starts: Float64Array;
  private readonly counts: Uint32Array;

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {
    const n = Math.ceil(ttlMs / BUCKET_MS) + 1;
    this.starts = new Float64Array(n).fill(-1);
    this.counts = new Uint32Array(n);
  }

  add(): void {
    const b = Math.floor(this.now() / BUCKET_MS);
    const slot = b % this.counts.length;
    if (this.starts[slot] !== b) {
      this.starts[slot] = b;
      this.counts[slot] = 0;
    }
    this.counts[slot]!++;
  }

  /** Count within the window and when the oldest counted bucket leaves it (ms from now). */
  read(): { count: number; oldestLeavesInMs: number } {
    const now = this.now();
    let count = 0;
    let oldest = Infinity;
    for (let i = 0; i < this.counts.length; i++) {
      const end = (this.starts[i]! + 1) * BUCKET_MS;
      if (this.counts[i] === 0 || end + this.ttlMs <= now) continue;
      count += this.counts[i]!;
      oldest = Math.min(oldest, end + this.ttlMs - now);
    }
    return { count, oldestLeavesInMs: oldest === Infinity ? 0 : oldest };
  }
}

export class CoordinatorKeyStore implements UnactivatedKeys {
  private readonly opened: OpenedCounter;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly limit: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {
    this.opened = new OpenedCounter(ttlMs, now);
  }

  get size(): number {
    return this.opened.read().count;
  }

  ensureRoom(): void {
    const { count, oldestLeavesInMs } = this.opened.read();
    if (count >= this.limit) throw full(oldestLeavesInMs);
  }

  async put(token: string, key: Buffer, createdAt: number): Promise<boolean> {
    this.ensureRoom();
    const ttl = createdAt + this.ttlMs - this.now();
    if (!(await this.coordinator.setIfAbsent(KEYS.sessionLicense(token), key, Math.max(1, ttl)))) return false;
    this.opened.add();
    return true;
  }

  async get(token: string): Promise<Buffer | null> {
    return this.coordinator.get(KEYS.sessionLicense(token));
  }
}
