// Shard ownership: SHARD_COUNT fixed shards, each assigned by rendezvous hashing (SHA-256 scores,
// bounded loads) over the live members; a worker serves a shard only while it holds the shard's lease,
// renewed every tick.
// Every grant has a new fencing number, which every state write on the shard carries
// (Coordinator.fencedHashSet), so a worker that lost a lease can never overwrite its successor.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Coordinator } from './coordinator.js';
import { LEASES } from './names.js';

export const SHARD_COUNT = 1024;
export const LEASE_TTL_MS = 4_000;

/** FNV-1a, 32 bit: a stable hash of a session nonce or key id. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

let lastId: string | undefined;
let lastShard = 0;

/** The shard of a session or key id. A beat asks for its session's several times in a row: the last answer is kept. */
export function shardOf(id: string): number {
  if (id === lastId) return lastShard;
  lastShard = fnv1a(id) % SHARD_COUNT;
  lastId = id;
  return lastShard;
}

/** A member's score for a shard: the first 48 bits of SHA-256(`<member>#<shard>`), evenly spread. */
export function score(member: string, shard: number): number {
  return createHash('sha256').update(`${member}#${shard}`).digest().readUIntBE(0, 6);
}

/**
 * How far above its fair share (SHARD_COUNT / members) a member's load may go. Plain rendezvous
 * leaves the busiest of 16 workers about 1.25x its share (binomial spread over 1,024 shards); with
 * this cap no worker holds more than 1.05x (rounded up).
 */
const LOAD_CAP = 1.05;

/**
 * Rendezvous hashing with bounded loads: shard by shard in order, the member with the highest score
 * that is under the cap owns it (ties: the smaller id). Every worker computes the same map from the
 * same member list; when a member joins or leaves, most shards keep their owner. Recent maps are
 * kept (a map changes only with the members), so a lookup is an array read.
 */
export function rendezvous(shard: number, members: readonly string[]): string | undefined {
  if (members.length === 0) return undefined;
  const key = [...members].sort().join('\n');
  let owners = maps.get(key);
  if (!owners) {
    owners = assign([...members].sort());
    // A few recent lists (workers in one process, a list in flux), oldest dropped first.
    if (maps.size >= 8) maps.delete(maps.keys().next().value!);
    maps.set(key, owners);
  }
  return owners[shard];
}

/** Recently computed maps by member list: a pure function's cache, not shared state. */
const maps = new Map<string, string[]>();

function assign(members: readonly string[]): string[] {
  const cap = Math.ceil((SHARD_COUNT / members.length) * LOAD_CAP);
  const load = new Map(members.map((m) => [m, 0]));
  const owners: string[] = [];
  for (let shard = 0; shard < SHARD_COUNT; shard++) {
    const ranked = members.map((m) => ({ m, s: score(m, shard) })).sort((x, y) => y.s - x.s || (x.m < y.m ? -1 : 1));
    const owner = ranked.find((r) => load.get(r.m)! < cap)!.m;
    load.set(owner, load.get(owner)! + 1);
    owners.push(owner);
  }
  return owners;
}

export interface ShardHandlers {
  /** A shard became ours: load its state. */
  acquired(shard: number, fence: number): Promise<void>;
  /** A shard is no longer ours: drop its in-memory state. */
  released(shard: number): void;
}

export const leaseName = LEASES.shard;

export class ShardLeases {
  /** shard -> fence of the lease this worker holds. */
  private readonly owned = new Map<number, number>();
  private readonly holderCache = new Map<number, { holder: string; until: number }>();
  /** The live members as of the last rebalance. */
  private members: readonly string[] = [];

  /** Who loads and drops a shard's state; registered by the layer that keeps it (ClusterNode.onShards). */
  handlers: ShardHandlers = { acquired: async () => undefined, released: () => undefined };

  constructor(
    private readonly coordinator: Coordinator,
    private readonly id: string,
    private readonly log: Logger,
    private readonly now: () => number,
    /** How long a looked-up holder of someone else's shard is believed when it is the rendezvous choice. */
    private readonly cacheMs: number,
    /** ...and when it is not (a shard being handed over): the answer will change within a tick or two. */
    private readonly movingCacheMs: number,
  ) {}

  get size(): number {
    return this.owned.size;
  }

  fenceOf(shard: number): number | undefined {
    return this.owned.get(shard);
  }

  /** Renews what this worker should keep, releases what it should not, acquires what it should. */
  async rebalance(members: readonly string[], leaving: boolean): Promise<void> {
    this.members = members;
    await Promise.all(
      [...this.owned].map(async ([shard, fence]) => {
        if (leaving || rendezvous(shard, members) !== this.id) return this.release(shard, fence);
        if (!(await this.coordinator.renewLease(leaseName(shard), this.id, fence, LEASE_TTL_MS))) {
          this.log.warn({ shard }, 'cluster.lease_lost');
          this.owned.delete(shard);
          this.handlers.released(shard);
        }
      }),
    );
    if (leaving) return;
    const wanted: number[] = [];
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      if (!this.owned.has(shard) && rendezvous(shard, members) === this.id) wanted.push(shard);
    }
    await Promise.all(
      wanted.map(async (shard) => {
        const fence = await this.coordinator.acquireLease(leaseName(shard), this.id, LEASE_TTL_MS);
        if (fence === null) return; // its previous owner still holds it; retried next tick
        try {
          await this.handlers.acquired(shard, fence);
          this.owned.set(shard, fence);
          this.holderCache.delete(shard);
        } catch (err) {
          this.log.error({ err, shard }, 'cluster.acquire_failed');
          await this.coordinator.releaseLease(leaseName(shard), this.id, fence);
        }
      }),
    );
  }

  /** Lets every shard go (graceful leave): its state is already durable, the next owner loads it. */
  /**
   * The coordinator refused a write under this shard's fence: the lease is gone (expired while the
   * coordinator was away, or taken). Stop serving the shard at once; the next round takes it again
   * under a new fence when it is still this worker's, loading its state afresh.
   */
  lost(shard: number, fence: number): void {
    if (this.owned.get(shard) !== fence) return;
    this.log.warn({ shard }, 'cluster.lease_lost');
    this.owned.delete(shard);
    this.handlers.released(shard);
  }

  async releaseAll(): Promise<void> {
    await Promise.all([...this.owned].map(([shard, fence]) => this.release(shard, fence)));
  }

  private async release(shard: number, fence: number): Promise<void> {
    this.owned.delete(shard);
    this.handlers.released(shard);
    await this.coordinator.releaseLease(leaseName(shard), this.id, fence);
  }

  /**
   * Forgets every looked-up holder: called when the member list changes, the only time (besides a
   * lost lease, which its holder answers with NotOwner) that shards move.
   */
  forgetHolders(): void {
    this.holderCache.clear();
  }

  /**
   * Who serves a shard now: this worker, another one, or nobody (between owners). A cached holder is
   * only a routing hint: the worker asked checks its own lease (NotOwner) and a caller waiting on a
   * dead one looks again with `fresh` (ClusterNode.callOwner), so the cache may live for several ticks.
   */
  /** The holder of a shard without asking the coordinator: this worker, a cached holder, or undefined. */
  knownHolder(shard: number): string | undefined {
    if (this.owned.has(shard)) return this.id;
    const cached = this.holderCache.get(shard);
    return cached && this.now() < cached.until ? cached.holder : undefined;
  }

  async holderOf(shard: number, fresh: boolean): Promise<string | null> {
    if (this.owned.has(shard)) return this.id;
    const cached = this.holderCache.get(shard);
    if (!fresh && cached && this.now() < cached.until) return cached.holder;
    const lease = await this.coordinator.leaseHolder(leaseName(shard));
    if (lease) {
      const settled = lease.holder === rendezvous(shard, this.members);
      this.holderCache.set(shard, {
        holder: lease.holder,
        until: this.now() + (settled ? this.cacheMs : this.movingCacheMs),
      });
    } else this.holderCache.delete(shard);
    return lease?.holder ?? null;
  }
}
