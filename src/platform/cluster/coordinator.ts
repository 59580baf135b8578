// The coordination port (docs/architecture.md "House practices" 5): everything workers share goes through this
// interface. LocalCoordinator serves one process without Redis; RedisCoordinator serves a cluster.
// test/platform/cluster/coordinator.contract.test.ts runs one suite against both.
import type { RateLimiterAbstract } from 'rate-limiter-flexible';

export interface LimiterOptions {
  /** Distinguishes limiters sharing one store, e.g. `rl:init`. */
  keyPrefix: string;
  points: number;
  /** Window in seconds. */
  duration: number;
  /** Seconds a key stays blocked once its points are used up (0: until the window ends). */
  blockDuration?: number;
}

export type Unsubscribe = () => Promise<void>;

export interface Coordinator {
  readonly kind: 'local' | 'redis';
  /** A fixed-window limiter shared by every worker (rate-limiter-flexible). */
  limiter(opts: LimiterOptions): RateLimiterAbstract;
  get(key: string): Promise<Buffer | null>;
  /**
   * What get() would answer, when this implementation knows it without waiting (one process: its
   * memory); undefined when only get() can tell (Redis). Hot paths try it first and skip a promise.
   */
  peek(key: string): Buffer | null | undefined;
  set(key: string, value: Buffer, ttlMs: number): Promise<void>;
  /** Stores only when the key is absent; true when this call stored it (a nonce ledger, a claim). */
  setIfAbsent(key: string, value: Buffer, ttlMs: number): Promise<boolean>;
  del(key: string): Promise<void>;
  publish(channel: string, message: Buffer): Promise<void>;
  subscribe(channel: string, onMessage: (message: Buffer) => void): Promise<Unsubscribe>;
  /**
   * Grants a lease to `holder` when it is free or expired, with a fencing number that increases
   * on every grant; renews it (same fence) when `holder` has it already. null: someone else has it.
   */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<number | null>;
  /** Extends a lease still held under this fence; false when it was lost. */
  renewLease(name: string, holder: string, fence: number, ttlMs: number): Promise<boolean>;
  releaseLease(name: string, holder: string, fence: number): Promise<void>;
  leaseHolder(name: string): Promise<{ holder: string; fence: number } | null>;
  /**
   * Writes (value) or deletes (null) one field of a hash only while `lease` is held by `holder`
   * under `fence`: a write from a stale owner is refused (false).
   */
  fencedHashSet(
    lease: string,
    holder: string,
    fence: number,
    hash: string,
    field: string,
    value: Buffer | null,
  ): Promise<boolean>;
  hashSet(hash: string, field: string, value: Buffer): Promise<void>;
  hashDel(hash: string, field: string): Promise<void>;
  hashGet(hash: string, field: string): Promise<Buffer | null>;
  hashGetAll(hash: string): Promise<Map<string, Buffer>>;
  /**
   * One membership round on `hash`, timed by the coordinator's clock alone (never a worker's): stamps
   * `self` (its id with the current time, `<id>#addr` with its address) unless null, then returns the
   * members whose stamp is at most `ttlMs` old, with their addresses; stamps ten times older are
   * deleted with their address.
   */
  memberRound(
    hash: string,
    self: { id: string; address: string | undefined } | null,
    ttlMs: number,
  ): Promise<{ id: string; address: string | undefined }[]>;
  /** The coordinator's clock, ms since the epoch (Redis TIME): the clock every worker agrees on. */
  time(): Promise<number>;
  /** Throws when the shared store cannot be reached (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
