// Redis coordination for a cluster of workers. Every key and channel is built from one prefix
// (REDIS_PREFIX). Pub/sub uses a second connection, as Redis requires.
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { Coordinator, LimiterOptions, Unsubscribe } from './coordinator.js';
import { KEYS } from './names.js';

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
// Renewals, grouped like the fenced writes below: ARGV[1] is the items as one msgpack array, five
// values an item: its lease, its fence counter, "<holder>:<fence>", TTL, fence; one result per item.
// An expired lease nobody was granted since (the fence counter still equals ours) is renewed too:
// no other holder can have written under it. A stalled owner keeps its shards instead of dropping them.
// (The keys travel inside the argument, not in KEYS: Redis Cluster, which needs them declared, is not
// supported; a script call with thousands of arguments cost more to build and parse than the keys
// and values packed as one.)
const RENEW_BATCH = `
local items = cmsgpack.unpack(ARGV[1])
local out = {}
for n = 1, #items / 5 do
  local a = 5 * (n - 1)
  local lease, counter, value, ttl, fence = items[a + 1], items[a + 2], items[a + 3], items[a + 4], items[a + 5]
  local cur = redis.call('GET', lease)
  if cur == value then
    out[n] = redis.call('PEXPIRE', lease, ttl)
  elseif not cur and redis.call('GET', counter) == fence then
    redis.call('SET', lease, value, 'PX', ttl)
    out[n] = 1
  else
    out[n] = 0
  end
end
return out`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;
// Group commit of fenced writes: ARGV[1] is the group's deadline (ms, Redis's clock); ARGV[2] the
// items as one msgpack array, five values an item: its lease, the expected "<holder>:<fence>", its
// hash, the field, the value (false: delete the field). Each item's lease is checked on its own (read
// once per lease per call); one result per item, 1 written, 0 refused, -1 too late. A script runs
// atomically, so a batch becomes visible at once. Too late: the call ran after its caller gave up on
// it (a stalled Redis, or the client's queue sent again after a reconnect). The caller answered 503
// and kept the state it had; written now, the stored state would be one step ahead of the owner's,
// and whoever loads the shard next would refuse the client's retry.
const FENCED_HSET_BATCH = `
local items = cmsgpack.unpack(ARGV[2])
local count = #items / 5
local t = redis.call('TIME')
local out = {}
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[1]) then
  for n = 1, count do out[n] = -1 end
  return out
end
local leases = {}
for n = 1, count do
  local a = 5 * (n - 1)
  local lease = items[a + 1]
  local cur = leases[lease]
  if cur == nil then
    cur = redis.call('GET', lease)
    leases[lease] = cur
  end
  if cur == items[a + 2] then
    local value = items[a + 5]
    if value == false then
      redis.call('HDEL', items[a + 3], items[a + 4])
    else
      redis.call('HSET', items[a + 3], items[a + 4], value)
    end
    out[n] = 1
  else
    out[n] = 0
  end
end
return out`;

// A membership round by Redis's clock (TIME), so workers on hosts whose clocks disagree still agree
// on who is alive. KEYS[1] the hash; ARGV: own id ('' when leaving), own address ('' for none), TTL ms.
// Returns id, address ('' for none) pairs of the live members.
const MEMBER_ROUND = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], tostring(now))
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], ARGV[1] .. '#addr', ARGV[2]) end
end
local all = redis.call('HGETALL', KEYS[1])
local fields = {}
for i = 1, #all, 2 do fields[all[i]] = all[i + 1] end
local out = {}
for field, value in pairs(fields) do
  local stamp = tonumber(value)
  if string.sub(field, -5) ~= '#addr' and stamp then
    local age = now - stamp
    if age <= ttl then
      out[#out + 1] = field
      out[#out + 1] = fields[field .. '#addr'] or ''
    elseif age > ttl * 10 then
      redis.call('HDEL', KEYS[1], field, field .. '#addr')
    end
  end
end
return out`;

const REDIS_COMMAND_TIMEOUT_MS = 2_000;
/**
 * A fenced write must run this long before its caller's command timeout: the room for the error of
 * the measured clock offset (half a round trip) and for the reply's way back.
 */
const WRITE_DEADLINE_MARGIN_MS = 500;

/** A fenced write Redis ran after its deadline: refused unwritten; answered as a timeout is (503). */
class CoordinatorWriteLate extends Error {
  readonly code = 'ETIMEDOUT';
  constructor() {
    super('coordinator write ran past its deadline');
  }
}
/** Most items in one script call (a bigger group is split). */
const MAX_GROUP = 512;

type Reply = Promise<unknown>;
type BatchScript = (numKeys: number, ...args: (string | Buffer | number)[]) => Reply;
/** The scripts above as commands (ioredis defineCommand: EVALSHA, the text sent once per connection). */
interface Scripts {
  kwAcquire(lease: string, fence: string, holder: string, ttlMs: number): Reply;
  kwRelease(lease: string, value: string): Reply;
  kwRenewBatch: BatchScript;
  kwFencedHsetBatch: BatchScript;
  kwMemberRound(hash: string, id: string, address: string, ttlMs: number): Reply;
}

/** One item of a grouped script call: its five values, in the script's order. */
type Item = [string, string, string, string | number, string | Buffer | false | number];

/**
 * The values as one MessagePack array for a script's `cmsgpack.unpack`. Redis's cmsgpack knows no
 * `bin` type (msgpackr writes Buffers so), so bytes go as `str`: Lua strings are bytes either way.
 */
function packForScript(values: readonly (string | Buffer | number | false)[]): Buffer {
  let size = 5;
  for (const v of values)
    size += typeof v === 'string' ? 5 + Buffer.byteLength(v) : Buffer.isBuffer(v) ? 5 + v.length : 5;
  const out = Buffer.allocUnsafe(size);
  out[0] = 0xdd;
  out.writeUInt32BE(values.length, 1);
  let at = 5;
  for (const v of values) {
    if (v === false) out[at++] = 0xc2;
    else if (typeof v === 'number') {
      if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`not a u32: ${v}`);
      out[at] = 0xce;
      out.writeUInt32BE(v, at + 1);
      at += 5;
    } else {
      const n = typeof v === 'string' ? out.write(v, at + 5) : v.copy(out, at + 5);
      out[at] = 0xdb;
      out.writeUInt32BE(n, at + 1);
      at += 5 + n;
    }
  }
  return out.subarray(0, at);
}

/**
 * Collects the items issued in one event-loop turn and sends them as one call of a batch script
 * (`MAX_GROUP` items at most each), packed into one msgpack argument. Every caller's promise settles
 * with its own item's result, and only once that call has returned.
 */
class TurnBatch {
  private items: Item[] = [];
  private waiting: { resolve: (r: number) => void; reject: (err: unknown) => void }[] = [];

  constructor(
    private readonly script: () => BatchScript,
    /** Arguments of the whole call, before the items' (read when the call goes out). */
    private readonly head: () => (string | number)[] = () => [],
  ) {}

  add(item: Item): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      // setImmediate, not nextTick: it runs after the poll phase, so it gathers every request read in it.
      if (this.items.length === 0) setImmediate(() => this.flush());
      this.items.push(item);
      this.waiting.push({ resolve, reject });
    });
  }

  flush(): void {
    const items = this.items;
    const waiting = this.waiting;
    this.items = [];
    this.waiting = [];
    for (let i = 0; i < items.length; i += MAX_GROUP) {
      const group = waiting.slice(i, i + MAX_GROUP);
      const values: Item[number][] = [];
      for (let j = i; j < i + group.length; j++) values.push(...items[j]!);
      this.script()(0, ...this.head(), packForScript(values)).then(
        (r) => {
          for (let n = 0; n < group.length; n++) group[n]!.resolve(Number((r as unknown[])[n]));
        },
        (err: unknown) => {
          for (const g of group) g.reject(err);
        },
      );
    }
  }
}

export class RedisCoordinator implements Coordinator {
  readonly kind = 'redis' as const;
  readonly redis: Redis;
  private sub: Redis | undefined;
  private readonly handlers = new Map<string, Set<(m: Buffer) => void>>();
  private readonly scripts: Scripts;
  /** Fenced writes issued in one event-loop turn, committed together (group commit). */
  private readonly writes = new TurnBatch(
    () => this.scripts.kwFencedHsetBatch.bind(this.redis),
    () => [this.now() + this.offsetMs + REDIS_COMMAND_TIMEOUT_MS - WRITE_DEADLINE_MARGIN_MS],
  );
  /** Redis's clock less this host's, measured at every (re)connection: the fenced writes' deadlines. */
  private offsetMs = 0;
  /** Lease renewals of one turn (a tick renews every owned shard at once): one script call. */
  private readonly renewals = new TurnBatch(() => this.scripts.kwRenewBatch.bind(this.redis));

  constructor(
    url: string,
    private readonly prefix: string,
    /** This host's clock (tests give a skewed one); deadlines are set in Redis's, by the measured offset. */
    private readonly now: () => number = Date.now,
  ) {
    // Auto-pipelining batches the commands issued in one event-loop turn (lease renewals, state writes).
    // commandTimeout: a stalled Redis (SIGSTOP, a full network buffer) fails a call within 2 s, which
    // answers 503, instead of leaving requests and /readyz hanging for as long as the stall lasts.
    this.redis = new Redis(url, {
      maxRetriesPerRequest: 2,
      enableOfflineQueue: true,
      lazyConnect: false,
      enableAutoPipelining: true,
      // The group calls gather a turn already (TurnBatch, flushed in setImmediate): they go out at once
      // instead of waiting for the auto-pipeline's own setImmediate, a loop iteration later.
      autoPipeliningIgnoredCommands: ['kwFencedHsetBatch', 'kwRenewBatch'],
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    });
    // ioredis reconnects by itself; an error event without a listener would crash the process.
    this.redis.on('error', () => undefined);
    this.redis.on('ready', () => void this.measureOffset());
    this.redis.defineCommand('kwAcquire', { numberOfKeys: 2, lua: ACQUIRE });
    this.redis.defineCommand('kwRenewBatch', { lua: RENEW_BATCH });
    this.redis.defineCommand('kwRelease', { numberOfKeys: 1, lua: RELEASE });
    this.redis.defineCommand('kwFencedHsetBatch', { lua: FENCED_HSET_BATCH });
    this.redis.defineCommand('kwMemberRound', { numberOfKeys: 1, lua: MEMBER_ROUND });
    this.scripts = this.redis as unknown as Scripts;
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

  /** Redis is only known by asking: always get(). */
  peek(): undefined {
    return undefined;
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
    const r = (await this.scripts.kwAcquire(
      this.k(KEYS.lease(name)),
      this.k(KEYS.fence(name)),
      holder,
      Math.ceil(ttlMs),
    )) as number;
    return r < 0 ? null : r;
  }

  async renewLease(name: string, holder: string, fence: number, ttlMs: number) {
    const r = await this.renewals.add([
      this.k(KEYS.lease(name)),
      this.k(KEYS.fence(name)),
      `${holder}:${fence}`,
      Math.ceil(ttlMs),
      String(fence),
    ]);
    return r === 1;
  }

  async releaseLease(name: string, holder: string, fence: number) {
    await this.scripts.kwRelease(this.k(KEYS.lease(name)), `${holder}:${fence}`);
  }

  async leaseHolder(name: string) {
    const v = await this.redis.get(this.k(KEYS.lease(name)));
    if (!v) return null;
    const sep = v.lastIndexOf(':');
    return { holder: v.slice(0, sep), fence: Number(v.slice(sep + 1)) };
  }

  /**
   * Group commit: every fenced write issued in one event-loop turn (the beats that arrived together)
   * goes to Redis in one script call, checked item by item against its own lease. Each caller's
   * promise settles with its own item's result, and only once that call has returned, so a beat is
   * still acknowledged only after its own state is durable.
   */
  async fencedHashSet(
    lease: string,
    holder: string,
    fence: number,
    hash: string,
    field: string,
    value: Buffer | null,
  ): Promise<boolean> {
    const r = await this.writes.add([
      this.k(KEYS.lease(lease)),
      `${holder}:${fence}`,
      this.k(hash),
      field,
      value ?? false,
    ]);
    if (r === -1) throw new CoordinatorWriteLate();
    return r === 1;
  }

  private async measureOffset(): Promise<void> {
    try {
      const sent = this.now();
      const redisNow = await this.time();
      this.offsetMs = redisNow - (sent + this.now()) / 2;
    } catch {
      // Gone again: the next connection measures.
    }
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

  async memberRound(hash: string, self: { id: string; address: string | undefined } | null, ttlMs: number) {
    const flat = (await this.scripts.kwMemberRound(
      this.k(hash),
      self?.id ?? '',
      self?.address ?? '',
      Math.ceil(ttlMs),
    )) as string[];
    const out: { id: string; address: string | undefined }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, address: flat[i + 1] || undefined });
    return out;
  }

  async time() {
    const [s, us] = await this.redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
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
    // Whatever was issued in this turn still goes out before the connection closes.
    this.writes.flush();
    this.renewals.flush();
    this.handlers.clear();
    await Promise.allSettled([this.sub?.quit(), this.redis.quit()]);
  }
}
