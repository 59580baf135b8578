// Redis coordination for a cluster of workers. Every key and channel is built from one prefix
// (REDIS_PREFIX). Pub/sub uses a second connection, as Redis requires.
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { Coordinator, LimiterOptions, Unsubscribe } from './coordinator.js';

export class RedisCoordinator implements Coordinator {
  readonly kind = 'redis' as const;
  readonly redis: Redis;
  private sub: Redis | undefined;
  private readonly handlers = new Map<string, Set<(m: Buffer) => void>>();

  constructor(url: string, private readonly prefix: string) {
    this.redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
    // ioredis reconnects by itself; an error event without a listener would crash the process.
    this.redis.on('error', () => undefined);
  }

  private k(key: string) {
    return this.prefix + key;
  }

  limiter(opts: LimiterOptions) {
    return new RateLimiterRedis({
      storeClient: this.redis, useRedisPackage: false, keyPrefix: this.prefix + opts.keyPrefix,
      points: opts.points, duration: opts.duration, blockDuration: opts.blockDuration ?? 0,
    });
  }

  async get(key: string) {
    return this.redis.getBuffer(this.k(key));
  }

  async set(key: string, value: Buffer, ttlMs: number) {
    await this.redis.set(this.k(key), value, 'PX', Math.max(1, Math.ceil(ttlMs)));
  }

  async setIfAbsent(key: string, value: Buffer, ttlMs: number) {
    return (await this.redis.set(this.k(key), value, 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX')) === 'OK';
  }

  async del(key: string) {
    await this.redis.del(this.k(key));
  }

  async publish(channel: string, message: Buffer) {
    await this.redis.publish(this.k(channel), message);
  }

  async subscribe(channel: string, onMessage: (message: Buffer) => void): Promise<Unsubscribe> {
    if (!this.sub) {
      this.sub = this.redis.duplicate();
      this.sub.on('error', () => undefined);
      this.sub.on('messageBuffer', (ch: Buffer, msg: Buffer) => {
        for (const fn of this.handlers.get(ch.toString()) ?? []) fn(msg);
      });
    }
    const full = this.k(channel);
    let set = this.handlers.get(full);
    if (!set) {
      this.handlers.set(full, (set = new Set()));
      await this.sub.subscribe(full);
    }
    set.add(onMessage);
    return async () => {
      set.delete(onMessage);
      if (set.size === 0) {
        this.handlers.delete(full);
        await this.sub?.unsubscribe(full);
      }
    };
  }

  async ping() {
    await this.redis.ping();
  }

  async close() {
    this.handlers.clear();
    await Promise.allSettled([this.sub?.quit(), this.redis.quit()]);
  }
}
