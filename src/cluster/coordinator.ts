// The coordination port (STYLE 5): everything workers share goes through this interface.
// LocalCoordinator serves one process without Redis; RedisCoordinator serves a cluster.
// test/contract/coordinator.contract.ts runs one suite against both.
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
  set(key: string, value: Buffer, ttlMs: number): Promise<void>;
  /** Stores only when the key is absent; true when this call stored it (a nonce ledger, a claim). */
  setIfAbsent(key: string, value: Buffer, ttlMs: number): Promise<boolean>;
  del(key: string): Promise<void>;
  publish(channel: string, message: Buffer): Promise<void>;
  subscribe(channel: string, onMessage: (message: Buffer) => void): Promise<Unsubscribe>;
  /** Throws when the shared store cannot be reached (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
