// In-process coordination for a single worker without Redis. Expiry is checked on read and swept
// periodically, so memory stays bounded by what is live.
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { Coordinator, LimiterOptions, Unsubscribe } from './coordinator.js';

// A stored value is one flat string: its deadline (8 bytes, float64) and its bytes, a char per
// byte (there is a client-session record per activated session). Keeping the caller's Buffer
// instead cost about 950 bytes a record: the Buffer object, the DataView msgpackr hangs on a
// Buffer it decodes, an entry object with a boxed number, and a slice of msgpackr's 8 KiB
// output buffer, which kept the other messages packed into it alive. get() returns a new Buffer,
// as Redis does: a caller can neither change what is stored nor pin anything to it.
type Stored = string;
/** A member's address field beside its stamp (membership.ts). */
const ADDR = '#addr';
const deadlineBytes = Buffer.alloc(8);

function stored(value: Buffer, expiresAt: number): Stored {
  const b = Buffer.allocUnsafe(8 + value.length);
  b.writeDoubleLE(expiresAt, 0);
  value.copy(b, 8);
  return b.toString('latin1');
}

function deadlineOf(s: Stored): number {
  deadlineBytes.write(s, 0, 8, 'latin1');
  return deadlineBytes.readDoubleLE(0);
}

function valueOf(s: Stored): Buffer {
  return Buffer.from(s, 'latin1').subarray(8);
}

interface LocalCoordinatorOptions {
  /**
   * Keys under these prefixes survive a restart: changes to them are tracked for the state
   * checkpoint (platform/db/state-checkpoint.ts), which this class serves as a source of kind `kv`.
   */
  durablePrefixes?: readonly string[];
}

export class LocalCoordinator implements Coordinator {
  readonly kind = 'local' as const;
  /** process_state.kind of the durable keys. */
  readonly checkpointKind = 'kv';
  private readonly store = new Map<string, Stored>();
  private readonly durablePrefixes: readonly string[];
  /** Durable keys written or deleted since the last checkpoint. */
  private dirty = new Set<string>();
  private readonly channels = new Map<string, Set<(m: Buffer) => void>>();
  private readonly leases = new Map<string, { holder: string; fence: number; expiresAt: number }>();
  private readonly fences = new Map<string, number>();
  private readonly hashes = new Map<string, Map<string, Buffer>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly now: () => number = Date.now,
    opts: LocalCoordinatorOptions = {},
  ) {
    this.durablePrefixes = opts.durablePrefixes ?? [];
    this.sweeper = setInterval(() => this.sweep(), 30_000);
    this.sweeper.unref();
  }

  private touched(key: string): void {
    for (const p of this.durablePrefixes) if (key.startsWith(p)) this.dirty.add(key);
  }

  /** Durable keys changed since the last call, with their current values (a checkpoint source). */
  takeChanges(): {
    upserts: { key: string; value: Buffer; expiresAt: number }[];
    deletes: string[];
  } {
    const keys = this.dirty;
    this.dirty = new Set();
    const upserts: { key: string; value: Buffer; expiresAt: number }[] = [];
    const deletes: string[] = [];
    for (const key of keys) {
      const s = this.live(key);
      if (s === undefined) deletes.push(key);
      else upserts.push({ key, value: valueOf(s), expiresAt: deadlineOf(s) });
    }
    return { upserts, deletes };
  }

  unsaved(keys: readonly string[]): void {
    for (const k of keys) this.dirty.add(k);
  }

  /** Puts back what a checkpoint saved (at start, before the first request). */
  restore(entries: readonly { key: string; value: Buffer; expiresAt: number }[]): void {
    for (const e of entries) if (e.expiresAt > this.now()) this.store.set(e.key, stored(e.value, e.expiresAt));
  }

  limiter(opts: LimiterOptions) {
    return new RateLimiterMemory({
      keyPrefix: opts.keyPrefix,
      points: opts.points,
      duration: opts.duration,
      blockDuration: opts.blockDuration ?? 0,
    });
  }

  private live(key: string): Stored | undefined {
    const s = this.store.get(key);
    if (s !== undefined && deadlineOf(s) <= this.now()) {
      this.store.delete(key);
      return undefined;
    }
    return s;
  }

  async get(key: string) {
    return this.peek(key);
  }

  peek(key: string): Buffer | null {
    const s = this.live(key);
    return s === undefined ? null : valueOf(s);
  }

  async set(key: string, value: Buffer, ttlMs: number) {
    this.store.set(key, stored(value, this.now() + ttlMs));
    this.touched(key);
  }

  async setIfAbsent(key: string, value: Buffer, ttlMs: number) {
    if (this.live(key) !== undefined) return false;
    this.store.set(key, stored(value, this.now() + ttlMs));
    this.touched(key);
    return true;
  }

  async del(key: string) {
    this.store.delete(key);
    this.touched(key);
  }

  async publish(channel: string, message: Buffer) {
    for (const fn of this.channels.get(channel) ?? []) queueMicrotask(() => fn(message));
  }

  async subscribe(channel: string, onMessage: (message: Buffer) => void): Promise<Unsubscribe> {
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(onMessage);
    return async () => {
      set.delete(onMessage);
      if (set.size === 0) this.channels.delete(channel);
    };
  }

  private liveLease(name: string) {
    const l = this.leases.get(name);
    if (l && l.expiresAt <= this.now()) {
      this.leases.delete(name);
      return undefined;
    }
    return l;
  }

  async acquireLease(name: string, holder: string, ttlMs: number) {
    const l = this.liveLease(name);
    if (l && l.holder !== holder) return null;
    const fence = l ? l.fence : (this.fences.get(name) ?? 0) + 1;
    this.fences.set(name, fence);
    this.leases.set(name, { holder, fence, expiresAt: this.now() + ttlMs });
    return fence;
  }

  async renewLease(name: string, holder: string, fence: number, ttlMs: number) {
    const l = this.leases.get(name);
    if (l && l.holder === holder && l.fence === fence) {
      l.expiresAt = this.now() + ttlMs;
      return true;
    }
    // Expired, and nobody was granted it since (the fence counter only moves on a grant): still ours.
    if ((!l || l.expiresAt <= this.now()) && this.fences.get(name) === fence) {
      this.leases.set(name, { holder, fence, expiresAt: this.now() + ttlMs });
      return true;
    }
    return false;
  }

  async releaseLease(name: string, holder: string, fence: number) {
    const l = this.liveLease(name);
    if (l && l.holder === holder && l.fence === fence) this.leases.delete(name);
  }

  async leaseHolder(name: string) {
    const l = this.liveLease(name);
    return l ? { holder: l.holder, fence: l.fence } : null;
  }

  async fencedHashSet(lease: string, holder: string, fence: number, hash: string, field: string, value: Buffer | null) {
    const l = this.liveLease(lease);
    if (!l || l.holder !== holder || l.fence !== fence) return false;
    if (value === null) await this.hashDel(hash, field);
    else await this.hashSet(hash, field, value);
    return true;
  }

  async hashSet(hash: string, field: string, value: Buffer) {
    let h = this.hashes.get(hash);
    if (!h) this.hashes.set(hash, (h = new Map()));
    h.set(field, value);
  }

  async hashDel(hash: string, field: string) {
    const h = this.hashes.get(hash);
    h?.delete(field);
    if (h?.size === 0) this.hashes.delete(hash);
  }

  async hashGet(hash: string, field: string) {
    return this.hashes.get(hash)?.get(field) ?? null;
  }

  async hashGetAll(hash: string) {
    return new Map(this.hashes.get(hash) ?? []);
  }

  async memberRound(hash: string, self: { id: string; address: string | undefined } | null, ttlMs: number) {
    const now = this.now();
    if (self) {
      await this.hashSet(hash, self.id, Buffer.from(String(now)));
      if (self.address) await this.hashSet(hash, self.id + ADDR, Buffer.from(self.address));
    }
    const fields = await this.hashGetAll(hash);
    const out: { id: string; address: string | undefined }[] = [];
    for (const [field, value] of fields) {
      if (field.endsWith(ADDR)) continue;
      const age = now - Number(value.toString()); // NaN (not a stamp): neither live nor deleted
      if (age <= ttlMs) out.push({ id: field, address: fields.get(field + ADDR)?.toString() });
      else if (age > ttlMs * 10) {
        await this.hashDel(hash, field);
        await this.hashDel(hash, field + ADDR);
      }
    }
    return out;
  }

  async time() {
    return this.now();
  }

  async ping() {}

  async close() {
    clearInterval(this.sweeper);
    this.store.clear();
    this.channels.clear();
    this.leases.clear();
    this.hashes.clear();
  }

  private sweep() {
    const now = this.now();
    for (const [k, s] of this.store) if (deadlineOf(s) <= now) this.store.delete(k);
  }
}
