// One worker's place in the cluster, built on the coordination port alone (so it runs the same
// on LocalCoordinator with one member and on Redis with many). It composes three parts, one file
// each: membership.ts (who is alive, and where it takes direct calls), shard-leases.ts (which
// shards this worker serves, fenced) and rpc.ts (typed calls to another worker, over a direct
// connection or pub/sub); this file ticks them and routes an operation to the owner of its shard.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Coordinator } from './coordinator.js';
import type { AppError } from '../../errors.js';
import { CLUSTER_VERSION, Membership } from './membership.js';
import { ShardLeases, leaseName, type ShardHandlers } from './shard-leases.js';
import { Rpc, unavailable, type OpHandler, type OpMap } from './rpc.js';
import type { ListenOptions } from './peer-transport.js';
import { NotOwner } from './wire-errors.js';
import type { Config } from '../../config.js';

export { SHARD_COUNT, rendezvous, shardOf } from './shard-leases.js';
export { NotOwner } from './wire-errors.js';
export type { OpMap } from './rpc.js';
export type { ListenOptions } from './peer-transport.js';

const TICK_MS = 500;
/** How long a request may wait for a shard to find an owner (failover, handover). */
const ROUTE_DEADLINE_MS = 12_000;
/**
 * A forwarded call's frame carries a deadline this much before the caller's own: the owner starts
 * nothing the caller could no longer wait for (it answers 503 at its deadline, not later).
 */
const FRAME_GRACE_MS = 1_000;
/** A local clock this far from the coordinator's is reported (start, /readyz, a warning). */
export const MAX_CLOCK_SKEW_MS = 1_000;
/**
 * How often the offset to the coordinator's clock is measured (in ticks): once a second, the ping
 * interval of the direct links, so a step of the coordinator's own clock is followed within one.
 */
const CLOCK_EVERY_TICKS = 2;
/** While a forwarded call waits, how often the caller checks that its target still owns the shard. */
const OWNER_CHECK_MS = 1_000;
/**
 * How long a looked-up holder of another worker's shard is believed when it is the shard's rendezvous
 * choice (forgotten sooner when members change); one tick when it is not (the shard is moving).
 */
const HOLDER_CACHE_MS = 5_000;

interface ClusterNodeOptions {
  /** Take direct calls from other workers on this address (absent: calls travel through pub/sub only). */
  listen?: ListenOptions | undefined;
  /** This worker's balancer route (AFFINITY_ROUTE-<index>), advertised to the others with its address. */
  route?: string | undefined;
  /**
   * The cluster version it announces (tests of mixed clusters; 1: as a build before versions);
   * default CLUSTER_VERSION.
   */
  version?: number | undefined;
}

/**
 * A worker's node options from its configuration: with Redis it listens for direct calls on
 * CLUSTER_PORT + WORKER_INDEX (0: any port); with AFFINITY_ROUTE it advertises its route.
 */
export function clusterNodeOptions(
  config: Pick<
    Config,
    'clusterHost' | 'clusterPort' | 'workerIndex' | 'clusterAdvertiseHost' | 'clusterPeerTimeoutMs' | 'affinityRoute'
  >,
  coordination: 'redis' | 'local',
): ClusterNodeOptions {
  return {
    listen:
      coordination === 'redis'
        ? {
            host: config.clusterHost,
            port: config.clusterPort === 0 ? 0 : config.clusterPort + config.workerIndex,
            advertiseHost: config.clusterAdvertiseHost,
            ackTimeoutMs: config.clusterPeerTimeoutMs,
          }
        : undefined,
    route: config.affinityRoute === undefined ? undefined : `${config.affinityRoute}-${config.workerIndex}`,
  };
}

/**
 * What a module needs of the node, typed by the operations it declares itself (a node that serves
 * more operations is one): heartbeats and license actors each see only their own.
 */
export interface ShardNode<Ops extends OpMap> {
  readonly id: string;
  readonly ownedShards: number;
  onShards(handlers: ShardHandlers): void;
  handle<K extends keyof Ops & string>(op: K, handler: OpHandler<Ops, K>): void;
  route<K extends keyof Ops & string>(
    shard: number,
    op: K,
    args: Ops[K]['args'],
    local: () => Promise<Ops[K]['result']>,
  ): Promise<Ops[K]['result']>;
  fenceOf(shard: number): number | undefined;
  /** Counts an operation a module ran itself on a shard this worker holds (the local fast path). */
  noteLocal(): void;
  /** A write under this fence was refused: this worker no longer serves the shard. */
  lost(shard: number, fence: number): void;
  leaseName(shard: number): string;
}

export class ClusterNode<Ops extends OpMap = OpMap> implements ShardNode<Ops> {
  /** `v<CLUSTER_VERSION>.<uuid>`: the version travels with the id (membership.ts). */
  readonly id: string;
  private readonly membership: Membership;
  private readonly leases: ShardLeases;
  /**
   * The worker that last answered a call forwarded for a shard: the route an answer names when the
   * holder cache has already let the entry go (a shard still moving is cached for one tick only,
   * shorter than a call that waited through a failover). A hint, possibly stale: at worst one forward.
   */
  private readonly answeredBy = new Map<number, string>();
  private readonly rpc: Rpc<Ops>;
  private timer: NodeJS.Timeout | undefined;
  private leaving = false;
  private ticking: Promise<void> | undefined;
  private ticks = 0;
  /** Coordinator clock minus local wall clock, ms (measured every CLOCK_EVERY_TICKS ticks; reported as skew). */
  private offsetMs = 0;
  /**
   * Coordinator clock minus this process's monotonic clock (performance.now()), ms: cluster time is
   * read through it, so a step of this host's wall clock (NTP, an operator's `date -s`) never moves
   * a deadline (docs/multi-host.md "Clocks"). Until measured: the wall clock's.
   */
  private monoOffsetMs = Date.now() - performance.now();
  private skewReported = false;
  /** Operations sent to another worker (the share of forwarded requests). */
  forwarded = 0;
  /** Operations run here. */
  servedLocally = 0;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly log: Logger,
    now: () => number,
    opts: ClusterNodeOptions = {},
  ) {
    const version = opts.version ?? CLUSTER_VERSION;
    // The baseline has no prefix: that is how builds from before versions name themselves.
    this.id = version === 1 ? randomUUID() : `v${version}.${randomUUID()}`;
    this.membership = new Membership(coordinator, this.id, opts.route);
    this.leases = new ShardLeases(coordinator, this.id, log, now, HOLDER_CACHE_MS, TICK_MS);
    this.rpc = new Rpc<Ops>(coordinator, this.id, log, {
      listen: opts.listen,
      addressOf: (worker) => this.membership.addressOf(worker),
      clusterNow: () => this.clusterNow(),
    });
  }

  /** The coordinator's clock as this worker estimates it (deadlines in forwarded calls). */
  clusterNow(): number {
    return performance.now() + this.monoOffsetMs;
  }

  /** Local clock minus the coordinator's, ms, as last measured (0 before the first measurement). */
  get clockSkewMs(): number {
    return -this.offsetMs;
  }

  /** Forwarded operations written to a direct connection to their owner. */
  get directCalls(): number {
    return this.rpc.counters.direct;
  }

  /** Forwarded operations sent through pub/sub (owner's address unknown or unreachable). */
  get pubsubCalls(): number {
    return this.rpc.counters.pubsub;
  }

  /** Calls re-sent through pub/sub because the direct link they were written on went down. */
  get fallbackCalls(): number {
    return this.rpc.counters.fallbacks;
  }

  /** Requests from other workers dropped unrun: they arrived after their deadline. */
  get expiredFrames(): number {
    return this.rpc.counters.expired;
  }

  /** Second copies of a request (a fallback, a call published again) answered without running it again. */
  get duplicateFrames(): number {
    return this.rpc.counters.duplicates;
  }

  /** Calls published again while awaited (pub/sub delivers at most once). */
  get resentCalls(): number {
    return this.rpc.counters.resent;
  }

  /** Direct links to other workers with a working connection now. */
  get peerLinksUp(): number {
    return this.rpc.linksUp;
  }

  /** Direct links declared down since start (unanswered ping, or closed). */
  get peerLinkDowns(): number {
    return this.rpc.linkDowns;
  }

  /** Test hook (FAULT_PEER_FREEZE): stop or resume reading what other workers send directly. */
  freezePeerLinks(on: boolean): void {
    this.rpc.freeze(on);
  }

  /**
   * Measures the offset between this worker's clock and the coordinator's (half the round trip
   * counted); warns once when it passes MAX_CLOCK_SKEW_MS, and once when it is back under.
   */
  async measureClock(): Promise<void> {
    const before = Date.now();
    const t0 = performance.now();
    const remote = await this.coordinator.time();
    const rtt = performance.now() - t0;
    this.offsetMs = Math.round(remote - (before + rtt / 2));
    this.monoOffsetMs = remote - (t0 + rtt / 2);
    const skewed = Math.abs(this.offsetMs) > MAX_CLOCK_SKEW_MS;
    if (skewed !== this.skewReported) {
      this.skewReported = skewed;
      if (skewed)
        this.log.warn(
          {
            skewMs: this.clockSkewMs,
            maxMs: MAX_CLOCK_SKEW_MS,
            hint: "this host's clock differs from the Redis clock: keep every host on NTP (docs/multi-host.md)",
          },
          'cluster.clock_skew',
        );
      else this.log.info({ skewMs: this.clockSkewMs }, 'cluster.clock_skew_cleared');
    }
  }

  /** `host:port` this worker takes direct calls at; undefined without a listener. */
  get address(): string | undefined {
    return this.rpc.address;
  }

  get ownedShards(): number {
    return this.leases.size;
  }

  get memberCount(): number {
    return this.membership.members.length;
  }

  /**
   * The cluster version every live member speaks (the lowest announced). A change to the shard score
   * or to an operation's shape is used only from the version that brings it on: `speaks(n)`.
   */
  get clusterVersion(): number {
    return this.membership.version;
  }

  speaks(version: number): boolean {
    return this.membership.version >= version;
  }

  /** Registers who loads a shard's state when this worker acquires it and drops it on release (before start). */
  onShards(handlers: ShardHandlers): void {
    this.leases.handlers = handlers;
  }

  /** Registers what answers calls of `op` from other workers. */
  handle<K extends keyof Ops & string>(op: K, handler: OpHandler<Ops, K>): void {
    this.rpc.handle(op, handler);
  }

  async start(): Promise<void> {
    await this.measureClock();
    await this.rpc.start();
    this.membership.address = this.rpc.address;
    await this.tick();
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** Fence of a shard this worker holds, or undefined. */
  fenceOf(shard: number): number | undefined {
    return this.leases.fenceOf(shard);
  }

  noteLocal(): void {
    this.servedLocally++;
  }

  lost(shard: number, fence: number): void {
    this.leases.lost(shard, fence);
  }

  leaseName(shard: number): string {
    return leaseName(shard);
  }

  /** One round: stamp membership, read members, renew, release and acquire leases. */
  tick(): Promise<void> {
    this.ticking ??= this.round().finally(() => {
      this.ticking = undefined;
    });
    return this.ticking;
  }

  private async round(): Promise<void> {
    try {
      const before = this.membership.members;
      // The secret's read must not hold up lease renewals: without it, calls fall back to pub/sub.
      const secret = this.rpc
        .refresh()
        .catch((err: unknown) => this.log.warn({ err }, 'cluster.secret_refresh_failed'));
      const clock =
        ++this.ticks % CLOCK_EVERY_TICKS === 0
          ? this.measureClock().catch((err: unknown) => this.log.warn({ err }, 'cluster.clock_read_failed'))
          : undefined;
      const [members] = await Promise.all([this.membership.refresh(this.leaving), secret, clock]);
      if (members.length !== before.length || members.some((m, i) => m !== before[i])) this.leases.forgetHolders();
      await this.leases.rebalance(members, this.leaving);
    } catch (err) {
      this.log.warn({ err }, 'cluster.tick_failed');
    }
  }

  /**
   * The balancer route of the worker serving a shard, as far as this worker knows without asking
   * (its own shards, and holders looked up recently); undefined when unknown or without routes.
   */
  routeOf(shard: number): string | undefined {
    const holder = this.leases.knownHolder(shard) ?? this.answeredBy.get(shard);
    return holder === undefined ? undefined : this.membership.routeOf(holder);
  }

  /** Who serves a shard now: this worker, another one, or nobody (between owners). */
  ownerOf(shard: number, fresh = false): Promise<string | null> {
    return this.leases.holderOf(shard, fresh);
  }

  /**
   * Runs `op` on the owner of `shard`: here when we own it, else on the owner through a call.
   * Waits (bounded) through failover and handover, when a shard is briefly without an owner.
   * Past the deadline the caller gets 503 (Retry-After), never a 500.
   */
  async route<K extends keyof Ops & string>(
    shard: number,
    op: K,
    args: Ops[K]['args'],
    local: () => Promise<Ops[K]['result']>,
  ): Promise<Ops[K]['result']> {
    // Real time, not the injected clock: this bounds a wait on sockets and other processes.
    const deadline = performance.now() + ROUTE_DEADLINE_MS;
    let fresh = false;
    for (;;) {
      const owner = await this.ownerOf(shard, fresh);
      try {
        if (owner === this.id) {
          this.servedLocally++;
          return await local();
        }
        if (owner) {
          this.forwarded++;
          const result = await this.callOwner(shard, owner, op, args, deadline);
          this.answeredBy.set(shard, owner);
          return result;
        }
      } catch (err) {
        if (!(err instanceof NotOwner) && !(err instanceof OwnerMoved)) throw err;
      }
      if (performance.now() > deadline) throw noOwner();
      fresh = true;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Sends one call to the shard's owner and waits for its answer for as long as that worker still
   * holds the shard (up to the deadline). A call is never made twice of the same owner: a slow or
   * starved owner may still be running the first one, and a second call of a claim queued behind it
   * would answer the client with the first call's effect. The same request (same id) is published
   * again at every owner check when it went through pub/sub, which may lose it; the owner answers a
   * second copy from the first run. It is abandoned only when the lease moved (the owner died or
   * handed the shard over), and then the new owner is asked.
   */
  private async callOwner<K extends keyof Ops & string>(
    shard: number,
    owner: string,
    op: K,
    args: Ops[K]['args'],
    deadline: number,
  ): Promise<Ops[K]['result']> {
    // The frame's deadline, in cluster time, leaves the owner no chance to run it after we gave up.
    const frameDeadline = this.clusterNow() + (deadline - performance.now()) - FRAME_GRACE_MS;
    const { reply, forget, again } = this.rpc.send(owner, op, args, frameDeadline);
    const waiting = Symbol('waiting');
    try {
      for (;;) {
        const remaining = deadline - performance.now();
        if (remaining <= 0) throw noOwner();
        let timer: NodeJS.Timeout | undefined;
        const tick = new Promise<typeof waiting>((r) => {
          timer = setTimeout(() => r(waiting), Math.min(OWNER_CHECK_MS, remaining));
        });
        const r = await Promise.race([reply, tick]).finally(() => clearTimeout(timer));
        if (r !== waiting) return r as Ops[K]['result'];
        if ((await this.ownerOf(shard, true)) !== owner) throw new OwnerMoved();
        again(); // the same request (the owner runs it once): pub/sub may have lost the first copy
      }
    } finally {
      forget();
    }
  }

  /**
   * Graceful leave: stop being a member, then hand every shard back (its state is already
   * durable, so the next owner loads it). Calls keep being answered until close().
   */
  async leave(): Promise<void> {
    this.leaving = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    await this.membership.leave();
    await this.leases.releaseAll();
  }

  /** Leaves (if it has not), then stops the listener, ends direct connections and pub/sub. */
  async close(): Promise<void> {
    if (!this.leaving) await this.leave();
    await this.rpc.close();
  }
}

/** The worker a call went to no longer holds the shard: ask the new owner. */
class OwnerMoved extends Error {}

/** No worker could serve the shard in time (failover under way, or the owner starved): retry later. */
function noOwner(): AppError {
  return unavailable();
}
