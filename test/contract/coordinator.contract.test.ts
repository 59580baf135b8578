// One contract, two implementations (STYLE 5): LocalCoordinator and RedisCoordinator must behave alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Coordinator } from '../../src/cluster/coordinator.js';
import { LocalCoordinator } from '../../src/cluster/local.coordinator.js';
import { RedisCoordinator } from '../../src/cluster/redis.coordinator.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const hasRedis = await redisAvailable();

const implementations: [string, boolean, () => Coordinator][] = [
  ['local', true, () => new LocalCoordinator()],
  ['redis', hasRedis, () => new RedisCoordinator(REDIS_URL, `kwtest:${randomBytes(4).toString('hex')}:`)],
];

for (const [name, enabled, make] of implementations) {
  describe.skipIf(!enabled)(`coordinator contract: ${name}`, () => {
    let c: Coordinator;
    beforeAll(() => {
      c = make();
    });
    afterAll(() => c.close());

    it('stores, reads, replaces and deletes values with a TTL', async () => {
      expect(await c.get('k1')).toBeNull();
      await c.set('k1', Buffer.from('one'), 60_000);
      expect((await c.get('k1'))?.toString()).toBe('one');
      await c.set('k1', Buffer.from('two'), 60_000);
      expect((await c.get('k1'))?.toString()).toBe('two');
      await c.del('k1');
      expect(await c.get('k1')).toBeNull();
    });

    it('expires values after their TTL', async () => {
      await c.set('short', Buffer.from('x'), 30);
      await new Promise((r) => setTimeout(r, 80)); // the TTL itself is the event under test
      expect(await c.get('short')).toBeNull();
    });

    it('setIfAbsent stores once (a nonce ledger)', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => c.setIfAbsent('nonce', Buffer.from('1'), 60_000)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it('delivers published messages to every subscriber until it unsubscribes', async () => {
      const got: string[] = [];
      let wake!: () => void;
      const two = new Promise<void>((r) => (wake = r));
      const un1 = await c.subscribe('chan', (m) => { got.push(`a:${m}`); if (got.length === 2) wake(); });
      const un2 = await c.subscribe('chan', (m) => { got.push(`b:${m}`); if (got.length === 2) wake(); });
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
  });
}
