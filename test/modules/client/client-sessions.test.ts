// Client sessions over sealed tokens, on the real in-process coordinator with a clock
// moved by hand: 24 hours to the millisecond, a stored record wins over the token, enc_key
// sessions keep their response key under a bound that answers 503 with Retry-After and recovers,
// and tokens are drawn on shards the worker owns.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { SHARD_COUNT, shardOf } from '../../../src/platform/cluster/cluster-node.js';
import {
  AFFINITY_DRAWS,
  ClientSessions,
  SESSION_TTL_MS,
  type ShardOwnership,
} from '../../../src/modules/client/client-sessions.js';
import { CompactKeyStore } from '../../../src/modules/client/unactivated-keys.js';
import { AppError } from '../../../src/errors.js';

let t = Date.UTC(2026, 10, 21, 12, 0, 0);
const now = () => t;
const coordinators: LocalCoordinator[] = [];
afterEach(async () => {
  for (const c of coordinators.splice(0)) await c.close();
});

function sessions(opts: { limit?: number; node?: ShardOwnership; key?: Buffer } = {}) {
  const coordinator = new LocalCoordinator(now);
  coordinators.push(coordinator);
  return new ClientSessions({
    coordinator,
    now,
    tokenKey: opts.key ?? randomBytes(32),
    limit: opts.limit ?? 1000,
    ...(opts.node ? { node: opts.node } : {}),
  });
}

describe('unactivated sessions are their own token', () => {
  it('live exactly 24 hours: valid 1 ms before, unknown at 24 h', async () => {
    const s = sessions();
    const appId = randomUUID();
    const token = await s.create(appId, null);
    expect(await s.get(token)).toMatchObject({ appId, encKey: null, activatedAt: null, userId: null });
    t += SESSION_TTL_MS - 1;
    expect(await s.get(token)).not.toBeNull();
    t += 1;
    expect(await s.get(token)).toBeNull();
  });

  it("another deployment's token is unknown", async () => {
    const a = sessions();
    const b = sessions();
    expect(await b.get(await a.create(randomUUID(), null))).toBeNull();
  });

  it('a stored record wins over the token: activation lasts 24 h from itself, deactivation holds', async () => {
    const s = sessions();
    const token = await s.create(randomUUID(), null);
    t += 3_600_000;
    const rec = (await s.get(token))!;
    const active = await s.activate(token, rec, { licenseId: 'lic-1', hwid: 'PC-0001' });
    expect(s.isActivated(active)).toBe(true);
    t += SESSION_TTL_MS - 1_000; // the token alone would be expired by now; the record is not
    const later = (await s.get(token))!;
    expect(later.licenseId).toBe('lic-1');
    expect(later.hwid).toBe('pc-0001');
    await s.deactivate(token, later);
    const off = (await s.get(token))!;
    expect(off.activatedAt).toBeNull();
    expect(s.isActivated(off)).toBe(false);
    t += 2_000; // the record's 24 h are over, and the token's long before: gone, not unactivated again
    expect(await s.get(token)).toBeNull();
  });
});

describe('sessions opened with an enc_key', () => {
  it('keep their response key until the 24 h end', async () => {
    const s = sessions();
    const key = randomBytes(32);
    const token = await s.create(randomUUID(), key);
    expect((await s.get(token))!.encKey).toEqual(key);
    t += SESSION_TTL_MS;
    expect(await s.get(token)).toBeNull();
    expect(s.keys.size).toBe(0);
  });

  it('past CLIENT_SESSION_LIMIT: 503 with Retry-After, sessions without a key still open, room again once the oldest expires', async () => {
    const s = sessions({ limit: 3 });
    const appId = randomUUID();
    const first = await s.create(appId, randomBytes(32));
    t += 60_000;
    await s.create(appId, randomBytes(32));
    await s.create(appId, randomBytes(32));
    const err = await Promise.resolve(s.create(appId, randomBytes(32))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'unavailable', status: 503, headers: { 'Retry-After': '300' } });
    expect(await s.create(appId, null)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Keys are freed a chunk at a time, when the newest key in it (opened at +60 s) expires.
    t += SESSION_TTL_MS - 60_000 - 120_000;
    expect(await Promise.resolve(s.create(appId, randomBytes(32))).catch((e: AppError) => e.headers)).toEqual({
      'Retry-After': '180',
    });
    t += 120_000;
    expect(await s.get(first)).toBeNull(); // the session ends on its own time
    expect(await Promise.resolve(s.create(appId, randomBytes(32))).catch((e: AppError) => e.headers)).toEqual({
      'Retry-After': '60',
    });
    t += 60_000;
    expect(await s.create(appId, randomBytes(32))).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.keys.size).toBe(1);
  });

  it('a keyed token whose key is gone (a restart without Redis) is unknown, not a session without encryption', async () => {
    const key = randomBytes(32);
    const before = sessions({ key });
    const token = await before.create(randomUUID(), randomBytes(32));
    const after = sessions({ key });
    expect(await after.get(token)).toBeNull();
    expect(await after.get(await before.create(randomUUID(), null))).not.toBeNull();
  });
});

describe('the compact key store', () => {
  it('finds each of many keys, holds them in 46-52 bytes each, and gives the memory back when they expire', async () => {
    const store = new CompactKeyStore(1_000_000, SESSION_TTL_MS, now);
    const s = sessions();
    const n = 50_000;
    const tokens: string[] = [];
    const keys: Buffer[] = [];
    for (let i = 0; i < n; i++) {
      const token = await s.create(randomUUID(), null);
      const key = randomBytes(32);
      expect(await store.put(token, key, t)).toBe(true);
      tokens.push(token);
      keys.push(key);
    }
    for (let i = 0; i < n; i += 97) expect((await store.get(tokens[i]!))!.equals(keys[i]!)).toBe(true);
    expect(await store.get(await s.create(randomUUID(), null))).toBeNull();
    expect(await store.put(tokens[7]!, randomBytes(32), t)).toBe(false); // a live fingerprint is refused
    expect(store.size).toBe(n);
    expect(store.bytes / n).toBeLessThan(53);
    t += SESSION_TTL_MS;
    expect(store.size).toBe(0);
    expect(store.bytes).toBeLessThan(8_192);
    expect(await store.get(tokens[0]!)).toBeNull();
  });
});

describe('affinity: tokens on shards this worker owns', () => {
  it('draws until the shard is owned (bounded), and takes any when the worker owns none', async () => {
    const owned = new Set(Array.from({ length: SHARD_COUNT / 2 }, (_, i) => i * 2)); // every even shard
    const half: ShardOwnership = { ownedShards: owned.size, fenceOf: (shard) => (owned.has(shard) ? 1 : undefined) };
    const s = sessions({ node: half });
    // Each draw misses every owned shard with probability 2^-16: allow one miss in 200 (two: ~2^-17).
    let hits = 0;
    for (let i = 0; i < 200; i++) if (owned.has(shardOf(await s.create(randomUUID(), null)))) hits++;
    expect(hits).toBeGreaterThanOrEqual(199);
    let calls = 0;
    const none: ShardOwnership = { ownedShards: 0, fenceOf: () => (calls++, undefined) };
    await sessions({ node: none }).create(randomUUID(), null);
    expect(calls).toBe(0);
    const one: ShardOwnership = { ownedShards: 1, fenceOf: (shard) => (calls++, shard === -1 ? 1 : undefined) };
    await sessions({ node: one }).create(randomUUID(), null);
    expect(calls).toBe(AFFINITY_DRAWS - 1); // the last draw is taken without asking
  });
});
