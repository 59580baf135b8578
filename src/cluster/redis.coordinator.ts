// Redis coordination for a cluster of workers. Every key and channel is built from one prefix
// (REDIS_PREFIX). Pub/sub uses a second connection, as Redis requires.
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { Coordinator, LimiterOptions, Unsubscribe } from './coordinator.js';

// Lease value: "<holder>:<fence>". The fence counter lives in its own key and only grows.
const ACQUIRE = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ':[^:]*$')
  if string.sub(cur, 1, sep - 1) ~= ARGV[1] then return -1 end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(string.sub(cur, sep + 1))
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'PX', ARGV[2])
return fence`;
// An expired lease nobody was granted since (the fence counter still equals ours) is renewed too:
// no other holder can have written under it. A stalled owner keeps its shards instead of dropping them.
const RENEW = `
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not cur and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
const FENCED_HSET = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then redis.call('HDEL', KEYS[2], ARGV[2]) else redis.call('HSET', KEYS[2], ARGV[2], ARGV[4]) end
return 1`;

const REDIS_COMMAND_TIMEOUT_MS = 2_000;

export class RedisCoordinator implements Coordinator {
  readonly kind = 'redis' as const;
  readonly redis: Redis;
  private sub: Redis | undefined;
  private readonly handlers = new Map<string, Set<(m: Buffer) => void>>();

  constructor(
    url: string,
    private readonly prefix: string,
  ) {
    // Auto-pipelining batches the commands issued in one event-loop turn (lease renewals, state writes).
    // commandTimeout: a stalled Redis (SIGSTOP, a full network buffer) fails a call within 2 s, which
    // answers 503, instead of leaving requests and /readyz hanging for as long as the stall lasts.
    this.redis = new Redis(url, {
      maxRetriesPerRequest: 2,
      enableOfflineQueue: true,
      lazyConnect: false,
      enableAutoPipelining: true,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    });
    // ioredis reconnects by itself; an error event without a listener would crash the process.
    this.redis.on('error', () => undefined);
  }

  private k(key: string) {
    return this.prefix + key;
  }

  limiter(opts: LimiterOptions) {
    return new RateLimiterRedis({
      storeClient: this.redis,
      useRedisPackage: false,
      keyPrefix: this.prefix + opts.keyPrefix,
      points: opts.points,
      duration: opts.duration,
      blockDuration: opts.blockDuration ?? 0,
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

  async acquireLease(name: string, holder: string, ttlMs: number) {
    const r = (await this.redis.eval(
      ACQUIRE,
      2,
      this.k(`lease:${name}`),
      this.k(`fence:${name}`),
      holder,
      Math.ceil(ttlMs),
    )) as number;
    return r < 0 ? null : r;
  }

  async renewLease(name: string, holder: string, fence: number, ttlMs: number) {
    return (
      (await this.redis.eval(
        RENEW,
        2,
        this.k(`lease:${name}`),
        this.k(`fence:${name}`),
        `${holder}:${fence}`,
        Math.ceil(ttlMs),
        String(fence),
      )) === 1
    );
  }

  async releaseLease(name: string, holder: string, fence: number) {
    await this.redis.eval(RELEASE, 1, this.k(`lease:${name}`), `${holder}:${fence}`);
  }

  async leaseHolder(name: string) {
    const v = await this.redis.get(this.k(`lease:${name}`));
    if (!v) return null;
    const sep = v.lastIndexOf(':');
    return { holder: v.slice(0, sep), fence: Number(v.slice(sep + 1)) };
  }

  async fencedHashSet(lease: string, holder: string, fence: number, hash: string, field: string, value: Buffer | null) {
    const r = await this.redis.eval(
      FENCED_HSET,
      2,
      this.k(`lease:${lease}`),
      this.k(hash),
      `${holder}:${fence}`,
      field,
      value === null ? '1' : '0',
      value ?? '',
    );
    return r === 1;
  }

  async hashSet(hash: string, field: string, value: Buffer) {
    await this.redis.hset(this.k(hash), field, value);
  }

  async hashDel(hash: string, field: string) {
    await this.redis.hdel(this.k(hash), field);
  }

  async hashGet(hash: string, field: string) {
    return this.redis.hgetBuffer(this.k(hash), field);
  }

  async hashGetAll(hash: string) {
    const raw = await this.redis.hgetallBuffer(this.k(hash));
    return new Map(Object.entries(raw));
  }

  async ping() {
    await this.redis.ping();
  }

  /**
   * How this Redis keeps data across its own restart. Client and heartbeat sessions live here, so
   * without AOF a Redis restart ends every one of them. 'unknown': CONFIG is refused (managed Redis).
   */
  async persistence(): Promise<'aof' | 'rdb' | 'none' | 'unknown'> {
    try {
      const [, aof] = (await this.redis.config('GET', 'appendonly')) as string[];
      if (aof === 'yes') return 'aof';
      const [, save] = (await this.redis.config('GET', 'save')) as string[];
      return save ? 'rdb' : 'none';
    } catch {
      return 'unknown';
    }
  }

  async close() {
    this.handlers.clear();
    await Promise.allSettled([this.sub?.quit(), this.redis.quit()]);
  }
}
