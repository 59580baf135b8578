// In-process coordination for a single worker without Redis. Expiry is checked on read and swept
// periodically, so memory stays bounded by what is live.
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { Coordinator, LimiterOptions, Unsubscribe } from './coordinator.js';

interface Entry {
  value: Buffer;
  expiresAt: number;
}

export class LocalCoordinator implements Coordinator {
  readonly kind = 'local' as const;
  private readonly store = new Map<string, Entry>();
  private readonly channels = new Map<string, Set<(m: Buffer) => void>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly now: () => number = Date.now) {
    this.sweeper = setInterval(() => this.sweep(), 30_000);
    this.sweeper.unref();
  }

  limiter(opts: LimiterOptions) {
    return new RateLimiterMemory({
      keyPrefix: opts.keyPrefix, points: opts.points, duration: opts.duration, blockDuration: opts.blockDuration ?? 0,
    });
  }

  private live(key: string): Entry | undefined {
    const e = this.store.get(key);
    if (e && e.expiresAt <= this.now()) {
      this.store.delete(key);
      return undefined;
    }
    return e;
  }

  async get(key: string) {
    return this.live(key)?.value ?? null;
  }

  async set(key: string, value: Buffer, ttlMs: number) {
    this.store.set(key, { value, expiresAt: this.now() + ttlMs });
  }

  async setIfAbsent(key: string, value: Buffer, ttlMs: number) {
    if (this.live(key)) return false;
    this.store.set(key, { value, expiresAt: this.now() + ttlMs });
    return true;
  }

  async del(key: string) {
    this.store.delete(key);
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

  async ping() {}

  async close() {
    clearInterval(this.sweeper);
    this.store.clear();
    this.channels.clear();
  }

  private sweep() {
    const now = this.now();
    for (const [k, e] of this.store) if (e.expiresAt <= now) this.store.delete(k);
  }
}
