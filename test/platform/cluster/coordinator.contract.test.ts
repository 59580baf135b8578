// One contract, two implementations (docs/architecture.md "House practices" 5): LocalCoordinator and RedisCoordinator
// must behave alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Coordinator } from '../../../src/platform/cluster/coordinator.js';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { RedisCoordinator } from '../../../src/platform/cluster/redis.coordinator.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { commandsOf } from '../../helpers/redis-monitor.js';

const hasRedis = await redisAvailable();

// Each implementation with an observer: another client of the same store (a second Redis connection;
// in one process, the coordinator itself).
const implementations: [string, boolean, () => [Coordinator, Coordinator]][] = [
  [
    'local',
    true,
    () => {
      const c = new LocalCoordinator();
      return [c, c];
    },
  ],
  [
    'redis',
    hasRedis,
    () => {
      const prefix = `kwtest:${randomBytes(4).toString('hex')}:`;
      return [new RedisCoordinator(REDIS_URL, prefix), new RedisCoordinator(REDIS_URL, prefix)];
    },
  ],
];

for (const [name, enabled, make] of implementations) {
  describe.skipIf(!enabled)(`coordinator contract: ${name}`, () => {
    let c: Coordinator;
    let observer: Coordinator;
    beforeAll(() => {
      [c, observer] = make();
    });
    afterAll(async () => {
      await c.close();
      if (observer !== c) await observer.close();
    });

    it('stores, reads, replaces and deletes values with a TTL', async () => {
      expect(await c.get('k1')).toBeNull();
      await c.set('k1', Buffer.from('one'), 60_000);
      expect((await c.get('k1'))?.toString()).toBe('one');
      await c.set('k1', Buffer.from('two'), 60_000);
      expect((await c.get('k1'))?.toString()).toBe('two');
      await c.del('k1');
      expect(await c.get('k1')).toBeNull();
    });

    it('peek answers what get answers, or undefined when it cannot tell without asking', async () => {
      const agrees = async (key: string) => {
        const peeked = c.peek(key);
        if (peeked !== undefined) expect(peeked?.toString() ?? null).toBe((await c.get(key))?.toString() ?? null);
        return peeked;
      };
      await agrees('p1');
      await c.set('p1', Buffer.from('one'), 60_000);
      await agrees('p1');
      await c.set('p1', Buffer.from('two'), 60_000);
      await agrees('p1');
      await c.del('p1');
      await agrees('p1');
      // One process knows its memory: it must answer rather than defer every read to get().
      if (c.kind === 'local') {
        await c.set('p2', Buffer.from('known'), 60_000);
        expect(c.peek('p2')?.toString()).toBe('known');
        expect(c.peek('p3')).toBeNull();
      }
    });

    it('expires values after their TTL', async () => {
      await c.set('short', Buffer.from('x'), 30);
      await new Promise((r) => setTimeout(r, 80)); // the TTL itself is the event under test
      expect(await c.get('short')).toBeNull();
    });

    it('setIfAbsent stores once (a nonce ledger)', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, () => c.setIfAbsent('nonce', Buffer.from('1'), 60_000)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it('delivers published messages to every subscriber until it unsubscribes', async () => {
      const got: string[] = [];
      let wake!: () => void;
      const two = new Promise<void>((r) => (wake = r));
      const un1 = await c.subscribe('chan', (m) => {
        got.push(`a:${m}`);
        if (got.length === 2) wake();
      });
      const un2 = await c.subscribe('chan', (m) => {
        got.push(`b:${m}`);
        if (got.length === 2) wake();
      });
      await c.publish('chan', Buffer.from('hello'));
      await two;
      expect(got.sort()).toEqual(['a:hello', 'b:hello']);
      await un1();
      await un2();
    });

    it('limits with a shared fixed window', async () => {
      const l = c.limiter({ keyPrefix: `t${name}`, points: 3, duration: 60 });
      for (let i = 0; i < 3; i++) await l.consume('ip');
      await expect(l.consume('ip')).rejects.toMatchObject({ remainingPoints: 0 });
      await l.consume('other-ip');
    });

    it('grants a lease to one holder, renews it under the same fence, and grants again with a higher fence', async () => {
      const f1 = await c.acquireLease('shard-1', 'w1', 60_000);
      expect(f1).toBeGreaterThan(0);
      expect(await c.acquireLease('shard-1', 'w2', 60_000)).toBeNull();
      expect(await c.acquireLease('shard-1', 'w1', 60_000)).toBe(f1);
      expect(await c.renewLease('shard-1', 'w1', f1!, 60_000)).toBe(true);
      expect(await c.renewLease('shard-1', 'w2', f1!, 60_000)).toBe(false);
      expect(await c.leaseHolder('shard-1')).toEqual({ holder: 'w1', fence: f1 });
      await c.releaseLease('shard-1', 'w1', f1!);
      expect(await c.leaseHolder('shard-1')).toBeNull();
      const f2 = await c.acquireLease('shard-1', 'w2', 60_000);
      expect(f2).toBeGreaterThan(f1!);
    });

    it('an expired lease goes to the next holder; the old holder can neither renew nor write', async () => {
      const f1 = (await c.acquireLease('shard-2', 'w1', 40))!;
      expect(await c.fencedHashSet('shard-2', 'w1', f1, 'h2', 's', Buffer.from('v1'))).toBe(true);
      await new Promise((r) => setTimeout(r, 90)); // the expiry itself is under test
      const f2 = (await c.acquireLease('shard-2', 'w2', 60_000))!;
      expect(f2).toBeGreaterThan(f1);
      expect(await c.renewLease('shard-2', 'w1', f1, 60_000)).toBe(false);
      expect(await c.fencedHashSet('shard-2', 'w1', f1, 'h2', 's', Buffer.from('stale'))).toBe(false);
      expect(await c.fencedHashSet('shard-2', 'w2', f2, 'h2', 's', Buffer.from('v2'))).toBe(true);
      expect((await c.hashGet('h2', 's'))?.toString()).toBe('v2');
      expect(await c.fencedHashSet('shard-2', 'w2', f2, 'h2', 's', null)).toBe(true);
      expect(await c.hashGet('h2', 's')).toBeNull();
    });

    it('an expired lease nobody took since can still be renewed by its holder (a stalled owner keeps its shard)', async () => {
      const f1 = (await c.acquireLease('shard-3', 'w1', 30))!;
      await new Promise((r) => setTimeout(r, 80)); // the expiry itself is under test
      expect(await c.renewLease('shard-3', 'w1', f1, 60_000)).toBe(true);
      expect(await c.leaseHolder('shard-3')).toEqual({ holder: 'w1', fence: f1 });
      expect(await c.acquireLease('shard-3', 'w2', 60_000)).toBeNull();
    });

    it('many concurrent fenced writes, current and stale, each resolve with their own result', async () => {
      const fa = (await c.acquireLease('gc-a', 'w1', 60_000))!;
      const fb = (await c.acquireLease('gc-b', 'w2', 60_000))!;
      type W = { lease: string; holder: string; fence: number; field: string; value: string | null; ok: boolean };
      const writes: W[] = [];
      for (let i = 0; i < 60; i++) {
        const v = `v${i}`;
        if (i % 5 === 0) writes.push({ lease: 'gc-a', holder: 'w1', fence: fa, field: `f${i}`, value: v, ok: true });
        if (i % 5 === 1)
          writes.push({ lease: 'gc-a', holder: 'w1', fence: fa + 1, field: `f${i}`, value: v, ok: false });
        if (i % 5 === 2) writes.push({ lease: 'gc-b', holder: 'w2', fence: fb, field: `f${i}`, value: v, ok: true });
        if (i % 5 === 3) writes.push({ lease: 'gc-b', holder: 'w1', fence: fb, field: `f${i}`, value: v, ok: false });
        if (i % 5 === 4) writes.push({ lease: 'gc-none', holder: 'w1', fence: 1, field: `f${i}`, value: v, ok: false });
      }
      // In the same group: a write then its delete (order kept), and a stale delete of a current write.
      writes.push({ lease: 'gc-a', holder: 'w1', fence: fa, field: 'gone', value: 'x', ok: true });
      writes.push({ lease: 'gc-a', holder: 'w1', fence: fa, field: 'gone', value: null, ok: true });
      writes.push({ lease: 'gc-b', holder: 'w2', fence: fb - 1, field: 'f2', value: null, ok: false });
      const results = await Promise.all(
        writes.map((w) =>
          c.fencedHashSet(w.lease, w.holder, w.fence, 'gc-h', w.field, w.value === null ? null : Buffer.from(w.value)),
        ),
      );
      expect(results).toEqual(writes.map((w) => w.ok));
      const stored = await observer.hashGetAll('gc-h');
      const expected = new Map(
        writes.filter((w) => w.ok && w.value !== null && w.field !== 'gone').map((w) => [w.field, w.value]),
      );
      expect(new Map([...stored].map(([k, v]) => [k, v.toString()]))).toEqual(expected);
    });

    it('a group of fenced writes is durable before each promise resolves, and visible all at once', async () => {
      const f = (await c.acquireLease('gc-v', 'w1', 60_000))!;
      const sizes: number[] = [];
      let done = false;
      const watcher = (async () => {
        while (!done) sizes.push((await observer.hashGetAll('gc-vh')).size);
      })();
      const writes = Array.from({ length: 40 }, (_, i) =>
        c.fencedHashSet('gc-v', 'w1', f, 'gc-vh', `s${i}`, Buffer.from(String(i))).then(async (ok) => {
          // Resolved: another client of the store reads it now.
          expect((await observer.hashGet('gc-vh', `s${i}`))?.toString()).toBe(String(i));
          return ok;
        }),
      );
      expect(await Promise.all(writes)).toEqual(writes.map(() => true));
      done = true;
      await watcher;
      expect(sizes.length).toBeGreaterThan(0);
      expect(sizes.filter((n) => n !== 0 && n !== 40)).toEqual([]);
      expect((await observer.hashGetAll('gc-vh')).size).toBe(40);
    });

    it('many concurrent renewals, of held, lost and foreign leases, each resolve with their own result', async () => {
      const held = await Promise.all(Array.from({ length: 10 }, (_, i) => c.acquireLease(`rn-${i}`, 'w1', 60_000)));
      const foreign = (await c.acquireLease('rn-x', 'w2', 60_000))!;
      const calls: [string, string, number, boolean][] = [];
      held.forEach((f, i) => {
        calls.push([`rn-${i}`, 'w1', f!, true]);
        calls.push([`rn-${i}`, 'w1', f! + 1, false]);
        calls.push([`rn-${i}`, 'w2', f!, false]);
      });
      calls.push(['rn-x', 'w1', foreign, false], ['rn-x', 'w2', foreign, true], ['rn-none', 'w1', 1, false]);
      const results = await Promise.all(calls.map(([l, h, f]) => c.renewLease(l, h, f, 60_000)));
      expect(results).toEqual(calls.map((x) => x[3]));
      expect(await observer.leaseHolder('rn-3')).toEqual({ holder: 'w1', fence: held[3] });
      expect(await observer.leaseHolder('rn-none')).toBeNull();
    });

    it('keeps hashes', async () => {
      await c.hashSet('h3', 'a', Buffer.from('1'));
      await c.hashSet('h3', 'b', Buffer.from('2'));
      const all = await c.hashGetAll('h3');
      expect([...all.keys()].sort()).toEqual(['a', 'b']);
      await c.hashDel('h3', 'a');
      expect([...(await c.hashGetAll('h3')).keys()]).toEqual(['b']);
    });

    it('answers ping', async () => {
      await expect(c.ping()).resolves.toBeUndefined();
    });

    it("tells its own clock's time", async () => {
      const before = Date.now();
      const t = await c.time();
      // The same machine: the store's clock and ours agree to well within a second.
      expect(Math.abs(t - before)).toBeLessThan(1_000);
      expect(Number.isInteger(t)).toBe(true);
    });

    it("membership rounds are timed by the coordinator's clock: stamps, live members, addresses, expiry", async () => {
      const h = `members-${randomBytes(3).toString('hex')}`;
      const now = await c.time();
      // Stamps others wrote: live (1 s old), just dead (5 s old), long dead (40 s old), not a stamp.
      await observer.hashSet(h, 'live', Buffer.from(String(now - 1_000)));
      await observer.hashSet(h, 'live#addr', Buffer.from('10.0.0.2:7000'));
      await observer.hashSet(h, 'dead', Buffer.from(String(now - 5_000)));
      await observer.hashSet(h, 'gone', Buffer.from(String(now - 40_000)));
      await observer.hashSet(h, 'gone#addr', Buffer.from('10.0.0.3:7000'));
      await observer.hashSet(h, 'junk', Buffer.from('not a stamp'));
      const round = await c.memberRound(h, { id: 'me', address: '10.0.0.1:7000' }, 3_000);
      expect(round.sort((x, y) => x.id.localeCompare(y.id))).toEqual([
        { id: 'live', address: '10.0.0.2:7000' },
        { id: 'me', address: '10.0.0.1:7000' },
      ]);
      const stored = await observer.hashGetAll(h);
      // The round stamped the caller with the coordinator's time, not a clock the caller passed.
      const stamp = Number(stored.get('me')!.toString());
      expect(Math.abs(stamp - (await c.time()))).toBeLessThan(1_000);
      expect(stored.get('me#addr')?.toString()).toBe('10.0.0.1:7000');
      // Ten times the TTL old: deleted with its address; between: kept, not live; not a stamp: left alone.
      expect([...stored.keys()].sort()).toEqual(['dead', 'junk', 'live', 'live#addr', 'me', 'me#addr']);
      // A leaving worker reads without stamping; without an address none is written.
      expect((await c.memberRound(h, null, 3_000)).map((m) => m.id).sort()).toEqual(['live', 'me']);
      const other = await c.memberRound(h, { id: 'plain', address: undefined }, 3_000);
      expect(other.find((m) => m.id === 'plain')).toEqual({ id: 'plain', address: undefined });
      expect((await observer.hashGetAll(h)).has('plain#addr')).toBe(false);
    });
  });
}

describe.skipIf(!hasRedis)('RedisCoordinator: group commit and loaded scripts', () => {
  const prefix = `kwtest:${randomBytes(4).toString('hex')}:`;
  let c: RedisCoordinator;
  let monitor: Redis;
  beforeAll(async () => {
    c = new RedisCoordinator(REDIS_URL, prefix);
    // Connected first (its clock read on connection answered): a reply arriving while the monitor
    // connection is being set up confuses ioredis ("Command queue state error").
    await c.ping();
    monitor = await new Redis(REDIS_URL).monitor();
  });
  afterAll(async () => {
    monitor.disconnect();
    await c.close();
  });

  const commands = (fn: () => Promise<void>) => commandsOf(monitor, c.redis, prefix, fn);

  it('the fenced writes of one event-loop turn go to Redis as one EVALSHA, each settled with its own result', async () => {
    const f = (await c.acquireLease('gm', 'w1', 60_000))!;
    await c.fencedHashSet('gm', 'w1', f, 'gm-h', 'warm', Buffer.from('1')); // the script text, once per connection
    const seen = await commands(async () => {
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          c.fencedHashSet('gm', 'w1', i % 2 === 0 ? f : f + 1, 'gm-h', `s${i}`, Buffer.from('v')),
        ),
      );
      expect(results).toEqual(Array.from({ length: 30 }, (_, i) => i % 2 === 0));
    });
    // evalsha, sha, no KEYS, the deadline, the 30 writes packed as one argument
    expect(seen.map((a) => [a[0]!.toLowerCase(), a.length, Number(a[2])])).toEqual([['evalsha', 5, 0]]);
    expect(seen[0]![4]!.match(/gm-h/g)).toHaveLength(30);
  });

  it('leases go through loaded scripts too, not the script text each call', async () => {
    // The first use of each script on a connection sends its text (EVAL); every later call its SHA.
    const f0 = (await c.acquireLease('gl', 'w1', 60_000))!;
    await c.renewLease('gl', 'w1', f0, 60_000);
    await c.releaseLease('gl', 'w1', f0);
    const seen = await commands(async () => {
      const f = (await c.acquireLease('gl', 'w1', 60_000))!;
      expect(await c.renewLease('gl', 'w1', f, 60_000)).toBe(true);
      await c.releaseLease('gl', 'w1', f);
    });
    expect(seen.map((a) => a[0]!.toLowerCase())).toEqual(['evalsha', 'evalsha', 'evalsha']);
  });

  it('the renewals of one turn (a tick renews every shard it holds) are one script call', async () => {
    const fences = await Promise.all(Array.from({ length: 20 }, (_, i) => c.acquireLease(`gr-${i}`, 'w1', 60_000)));
    await c.renewLease('gr-0', 'w1', fences[0]!, 60_000); // the script text, once per connection
    const seen = await commands(async () => {
      const ok = await Promise.all(fences.map((f, i) => c.renewLease(`gr-${i}`, 'w1', f!, 60_000)));
      expect(ok).toEqual(fences.map(() => true));
    });
    expect(seen.map((a) => a[0]!.toLowerCase())).toEqual(['evalsha']);
  });
});
