// RedisCoordinator beyond the shared contract: a group commit larger than one script call, TTLs
// under a millisecond, subscriptions shared by two handlers, lease holders whose ids contain ':',
// keys under the prefix and the persistence check. Needs Redis (REQUIRE_SERVICES=1 makes its
// absence a failure).
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { Coordinator } from '../../../src/platform/cluster/coordinator.js';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { RedisCoordinator } from '../../../src/platform/cluster/redis.coordinator.js';
import { infrastructureError } from '../../../src/errors.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { commandsOf } from '../../helpers/redis-monitor.js';

const hasRedis = await redisAvailable();

const implementations: [string, boolean, () => Coordinator][] = [
  ['local', true, () => new LocalCoordinator()],
  ['redis', hasRedis, () => new RedisCoordinator(REDIS_URL, `kwtest:${randomBytes(4).toString('hex')}:`)],
];

for (const [name, enabled, make] of implementations) {
  describe.skipIf(!enabled)(`coordinator details: ${name}`, () => {
    let c: Coordinator;
    beforeAll(() => {
      c = make();
    });
    afterAll(() => c.close());

    it('a lease holder id may contain colons', async () => {
      const f = (await c.acquireLease('colon', 'host:1234:w', 60_000))!;
      expect(await c.leaseHolder('colon')).toEqual({ holder: 'host:1234:w', fence: f });
      expect(await c.acquireLease('colon', 'host:1234:w', 60_000)).toBe(f);
      expect(await c.acquireLease('colon', 'host:1234', 60_000)).toBeNull();
      expect(await c.fencedHashSet('colon', 'host:1234:w', f, 'colon-h', 'k', Buffer.from('v'))).toBe(true);
    });

    it('one of two handlers of a channel unsubscribing leaves the other one subscribed', async () => {
      const a: string[] = [];
      const b: string[] = [];
      let wake!: () => void;
      let want = 2;
      const check = () => {
        if (a.length + b.length === want) wake();
      };
      let done = new Promise<void>((r) => (wake = r));
      const unA = await c.subscribe('shared', (m) => {
        a.push(m.toString());
        check();
      });
      const unB = await c.subscribe('shared', (m) => {
        b.push(m.toString());
        check();
      });
      await c.publish('shared', Buffer.from('1'));
      await done;
      await unA();
      want = 3;
      done = new Promise<void>((r) => (wake = r));
      await c.publish('shared', Buffer.from('2'));
      await done;
      expect([a, b]).toEqual([['1'], ['1', '2']]);
      await unB();
    });

    it('a TTL under a millisecond is a millisecond, not an error', async () => {
      await c.set('tiny', Buffer.from('x'), 0.4);
      expect(await c.setIfAbsent('tiny2', Buffer.from('x'), 0.4)).toBe(true);
    });
  });
}

describe.skipIf(!hasRedis)('RedisCoordinator', () => {
  const prefix = `kwtest:${randomBytes(4).toString('hex')}:`;
  let c: RedisCoordinator;
  let observer: Redis;
  let monitor: Redis;
  beforeAll(async () => {
    c = new RedisCoordinator(REDIS_URL, prefix);
    observer = new Redis(REDIS_URL);
    await c.ping(); // see coordinator.contract.test.ts: connected before the monitor is set up
    monitor = await new Redis(REDIS_URL).monitor();
  });
  afterAll(async () => {
    monitor.disconnect();
    observer.disconnect();
    await c.close();
  });

  const commands = (fn: () => Promise<void>) => commandsOf(monitor, c.redis, prefix, fn);

  it('a turn of more than 512 fenced writes goes out as two script calls, each write settled with its own result', async () => {
    const f = (await c.acquireLease('big', 'w1', 60_000))!;
    await c.fencedHashSet('big', 'w1', f, 'big-h', 'warm', Buffer.from('1'));
    const n = 600;
    const seen = await commands(async () => {
      const results = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          c.fencedHashSet('big', 'w1', i % 3 === 0 ? f + 1 : f, 'big-h', `s${i}`, Buffer.from(`v${i}`)),
        ),
      );
      expect(results).toEqual(Array.from({ length: n }, (_, i) => i % 3 !== 0));
    });
    // Each call: evalsha, sha, no KEYS, the deadline, its writes packed as one argument.
    expect(seen.map((a) => [a[0]!.toLowerCase(), a.length, (a[4]!.match(/big-h/g) ?? []).length])).toEqual([
      ['evalsha', 5, 512],
      ['evalsha', 5, n - 512],
    ]);
    const stored = await observer.hgetall(`${prefix}big-h`);
    expect(Object.keys(stored)).toHaveLength(1 + n - n / 3);
    expect(stored.s599).toBe('v599');
    expect(stored.s597).toBeUndefined(); // stale fence
  });

  it('a turn of more than 512 renewals is split the same way', async () => {
    const fences = await Promise.all(Array.from({ length: 520 }, (_, i) => c.acquireLease(`many-${i}`, 'w1', 60_000)));
    const ok = await Promise.all(fences.map((f, i) => c.renewLease(`many-${i}`, i === 519 ? 'w2' : 'w1', f!, 60_000)));
    expect(ok).toEqual(fences.map((_, i) => i !== 519));
  });

  it('reports how Redis keeps its data', async () => {
    const [, aof] = (await observer.config('GET', 'appendonly')) as string[];
    const [, save] = (await observer.config('GET', 'save')) as string[];
    expect(await c.persistence()).toBe(aof === 'yes' ? 'aof' : save ? 'rdb' : 'none');
  });

  it('keeps every key and channel under its prefix', async () => {
    await c.set('pfx', Buffer.from('1'), 60_000);
    await c.hashSet('pfx-h', 'f', Buffer.from('1'));
    await c.acquireLease('pfx-l', 'w1', 60_000);
    expect(await observer.get(`${prefix}pfx`)).toBe('1');
    expect(await observer.hget(`${prefix}pfx-h`, 'f')).toBe('1');
    expect(await observer.get(`${prefix}lease:pfx-l`)).toMatch(/^w1:\d+$/);
    expect(await observer.get(`${prefix}fence:pfx-l`)).toMatch(/^\d+$/);
    let got!: (m: string) => void;
    const message = new Promise<string>((r) => (got = r));
    const un = await c.subscribe('pfx-chan', (m) => got(m.toString()));
    await observer.publish(`${prefix}pfx-chan`, 'hello');
    expect(await message).toBe('hello');
    await un();
    expect(await observer.pubsub('NUMSUB', `${prefix}pfx-chan`)).toEqual([`${prefix}pfx-chan`, 0]);
  });
});

// Added after the first mutation run (docs/testing.md "Mutation testing"): each pins a behaviour a surviving
// mutant showed no test held.
for (const [name, enabled, make] of implementations) {
  describe.skipIf(!enabled)(`coordinator details, more closely: ${name}`, () => {
    let c: Coordinator;
    beforeAll(() => {
      c = make();
    });
    afterAll(() => c.close());

    it('a lease is released only by its holder, under its fence', async () => {
      const f = (await c.acquireLease('rel', 'w1', 60_000))!;
      await c.releaseLease('rel', 'w2', f);
      await c.releaseLease('rel', 'w1', f + 1);
      await c.releaseLease('rel', 'w2', f + 1);
      expect(await c.leaseHolder('rel')).toEqual({ holder: 'w1', fence: f });
      await c.releaseLease('rel', 'w1', f);
      expect(await c.leaseHolder('rel')).toBeNull();
    });

    it('a limiter with a block duration blocks past its window', async () => {
      const l = c.limiter({
        keyPrefix: `blk${randomBytes(3).toString('hex')}`,
        points: 1,
        duration: 1,
        blockDuration: 60,
      });
      await l.consume('k');
      const res = await l.consume('k').catch((r: unknown) => r);
      expect((res as { msBeforeNext: number }).msBeforeNext).toBeGreaterThan(30_000);
    });
  });
}

describe('LocalCoordinator, to the millisecond', () => {
  it('values and leases expire exactly at their TTL; a lease whose entry is gone is renewed if nobody took it', async () => {
    let now = 1_000_000;
    const c = new LocalCoordinator(() => now);
    try {
      await c.set('v', Buffer.from('x'), 100);
      now += 99;
      expect(await c.get('v')).not.toBeNull();
      now += 1;
      expect(await c.get('v')).toBeNull();
      const f = (await c.acquireLease('l', 'w1', 100))!;
      now += 100;
      expect(await c.leaseHolder('l')).toBeNull(); // expired: the entry is dropped
      expect(await c.renewLease('l', 'w1', f, 100)).toBe(true);
      expect(await c.leaseHolder('l')).toEqual({ holder: 'w1', fence: f });
      now += 99;
      expect(await c.leaseHolder('l')).not.toBeNull();
      now += 1;
      expect(await c.leaseHolder('l')).toBeNull();
      await c.acquireLease('l2', 'w1', 100);
      now += 100;
      const f2 = (await c.acquireLease('l2', 'w2', 100))!;
      expect(await c.renewLease('l2', 'w1', f2 - 1, 100)).toBe(false);
    } finally {
      await c.close();
    }
  });
});

describe.skipIf(!hasRedis)('RedisCoordinator, more closely', () => {
  const prefix = `kwtest:${randomBytes(4).toString('hex')}:`;
  let c: RedisCoordinator;
  let observer: Redis;
  beforeAll(() => {
    c = new RedisCoordinator(REDIS_URL, prefix);
    observer = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    observer.disconnect();
    await c.close();
  });

  it('keeps the TTL it was given', async () => {
    await c.set('ttl', Buffer.from('1'), 60_000);
    await c.setIfAbsent('ttl-nx', Buffer.from('1'), 60_000);
    expect(await observer.pttl(`${prefix}ttl`)).toBeGreaterThan(50_000);
    expect(await observer.pttl(`${prefix}ttl-nx`)).toBeGreaterThan(50_000);
  });

  it('a script that fails rejects every write of its group', async () => {
    const f = (await c.acquireLease('wrongtype', 'w1', 60_000))!;
    await c.set('not-a-hash', Buffer.from('x'), 60_000);
    const results = await Promise.allSettled([
      c.fencedHashSet('wrongtype', 'w1', f, 'not-a-hash', 'a', Buffer.from('1')),
      c.fencedHashSet('wrongtype', 'w1', f, 'fine-hash', 'b', Buffer.from('2')),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(String((results[0] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
  });

  it('a fenced write Redis runs after its caller gave up is refused: a stall never applies a write late', async () => {
    // A proxy that holds what the client sends while stalled (a Redis that stopped reading, a network
    // that stopped carrying) and passes it on when released: the write reaches Redis late.
    let stalled = false;
    const held: Buffer[] = [];
    let release = () => {};
    const proxy = net.createServer((client) => {
      const target = new URL(REDIS_URL);
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      upstream.pipe(client);
      client.on('data', (chunk: Buffer) => (stalled ? held.push(chunk) : upstream.write(chunk)));
      release = () => {
        stalled = false;
        for (const chunk of held.splice(0)) upstream.write(chunk);
      };
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const through = new RedisCoordinator(`redis://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`, prefix);
    try {
      const f = (await through.acquireLease('late', 'w1', 60_000))!;
      expect(await through.fencedHashSet('late', 'w1', f, 'late-hash', 'in-time', Buffer.from('1'))).toBe(true);
      stalled = true;
      const write = through.fencedHashSet('late', 'w1', f, 'late-hash', 'late', Buffer.from('2'));
      await expect(write).rejects.toThrow(/timed out/);
      expect(infrastructureError(await write.catch((e: unknown) => e))?.code).toBe('unavailable');
      release();
      // What Redis answers the late call goes nowhere; a call after it on the same connection is answered
      // only once the late one has run.
      expect(await through.fencedHashSet('late', 'w1', f, 'late-hash', 'after', Buffer.from('3'))).toBe(true);
      expect(await observer.hkeys(`${prefix}late-hash`)).toEqual(['in-time', 'after']);
    } finally {
      release();
      await through.close().catch(() => undefined);
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });

  it("a host whose clock is a minute off writes in time: deadlines are set by Redis's clock", async () => {
    for (const skew of [-60_000, 60_000]) {
      const skewed = new RedisCoordinator(REDIS_URL, prefix, () => Date.now() + skew);
      try {
        const f = (await skewed.acquireLease(`skew${skew}`, 'w1', 60_000))!;
        // Refused as late only until the offset is measured, which the connection does at once.
        const write = () =>
          skewed.fencedHashSet(`skew${skew}`, 'w1', f, 'skew-hash', String(skew), Buffer.from('1')).catch(() => 'late');
        await expect.poll(write).toBe(true);
      } finally {
        await skewed.close();
      }
    }
    expect((await observer.hkeys(`${prefix}skew-hash`)).sort()).toEqual(['-60000', '60000']);
  });

  it('ping fails when Redis cannot be reached', async () => {
    const down = new RedisCoordinator('redis://127.0.0.1:1', prefix);
    try {
      await expect(down.ping()).rejects.toThrow();
    } finally {
      await down.close().catch(() => undefined);
    }
  });
});
