// One worker's place in the cluster, built on the coordination port alone (so it runs the same
// on LocalCoordinator with one member and on Redis with many):
// - membership: each worker stamps itself into the `members` hash every tick; a stamp older than
//   MEMBER_TTL_MS means the worker is gone;
// - shards: SHARD_COUNT fixed shards; each is assigned by rendezvous hashing over the live
//   members, so a join or leave moves only the shards it must;
// - leases: a worker serves a shard only while it holds the shard's lease, renewed every tick;
//   every grant has a new fencing number and every state write carries it (fencedHashSet);
// - calls: a request for a shard owned elsewhere goes to the owner as a msgpack frame on its
//   `rpc:<worker>` channel and the reply comes back on the caller's, within one HTTP request.
import { randomUUID } from 'node:crypto';
import { pack, unpack } from 'msgpackr';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from './coordinator.js';
import { AppError, ERRORS, type ErrorCode } from '../errors.js';

export const SHARD_COUNT = 1024;
export const LEASE_TTL_MS = 4_000;
export const MEMBER_TTL_MS = 3_000;
export const TICK_MS = 500;
/** While a forwarded call waits, how often the caller checks that its target still owns the shard. */
const OWNER_CHECK_MS = 1_000;
/** How long a request may wait for a shard to find an owner (failover, handover). */
export const ROUTE_DEADLINE_MS = 12_000;

/** FNV-1a, 32 bit: a stable hash of a session nonce or key id. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function shardOf(id: string): number {
  return fnv1a(id) % SHARD_COUNT;
}

/** Rendezvous (highest random weight) hashing: the member with the top score owns the shard. */
export function rendezvous(shard: number, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const m of members) {
    const score = fnv1a(`${m}#${shard}`);
    if (score > bestScore || (score === bestScore && best !== undefined && m < best)) {
      best = m;
      bestScore = score;
    }
  }
  return best;
}

export class NotOwner extends Error {
  constructor(readonly shard: number) {
    super(`not the owner of shard ${shard}`);
  }
}

export interface ShardHandlers {
  /** A shard became ours: load its state. */
  acquired(shard: number, fence: number): Promise<void>;
  /** A shard is no longer ours: drop its in-memory state. */
  released(shard: number): void;
}

type CallHandler = (op: string, args: unknown) => Promise<unknown>;

interface Frame {
  t: 'req' | 'res';
  id: string;
  from: string;
  op?: string;
  args?: unknown;
  ok?: boolean;
  value?: unknown;
  error?: { name: string; code?: string; message: string };
}

export class ClusterNode {
  readonly id: string = randomUUID();
  private readonly owned = new Map<number, number>();
  private members: string[] = [];
  private readonly ownerCache = new Map<number, { holder: string; at: number }>();
  private readonly pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private timer: NodeJS.Timeout | undefined;
  private unsub: Unsubscribe | undefined;
  private leaving = false;
  private ticking: Promise<void> | undefined;
  private readonly handlers = new Map<string, CallHandler>();
  /** Operations sent to another worker (the share of forwarded requests). */
  forwarded = 0;
  /** Operations run here. */
  servedLocally = 0;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly shards: ShardHandlers,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  get ownedShards(): number {
    return this.owned.size;
  }

  get memberCount(): number {
    return this.members.length;
  }

  /** Registers what answers calls of `op` from other workers. */
  handle(op: string, handler: CallHandler): void {
    this.handlers.set(op, handler);
  }

  async start(): Promise<void> {
    this.unsub = await this.coordinator.subscribe(`rpc:${this.id}`, (m) => void this.onFrame(m));
    await this.tick();
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** Fence of a shard this worker holds, or undefined. */
  fenceOf(shard: number): number | undefined {
    return this.owned.get(shard);
  }

  leaseName(shard: number): string {
    return `shard:${shard}`;
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
      const now = this.now();
      if (!this.leaving) await this.coordinator.hashSet('members', this.id, Buffer.from(String(now)));
      const stamps = await this.coordinator.hashGetAll('members');
      const live: string[] = [];
      for (const [id, at] of stamps) {
        if (now - Number(at.toString()) <= MEMBER_TTL_MS) live.push(id);
        else if (now - Number(at.toString()) > MEMBER_TTL_MS * 10) void this.coordinator.hashDel('members', id).catch(() => undefined);
      }
      this.members = live.sort();
      const renewals = [...this.owned].map(async ([shard, fence]) => {
        const want = !this.leaving && rendezvous(shard, this.members) === this.id;
        if (!want) return this.release(shard, fence);
        if (!(await this.coordinator.renewLease(this.leaseName(shard), this.id, fence, LEASE_TTL_MS))) {
          this.log.warn({ shard }, 'cluster.lease_lost');
          this.owned.delete(shard);
          this.shards.released(shard);
        }
      });
      await Promise.all(renewals);
      if (this.leaving) return;
      const wanted: number[] = [];
      for (let shard = 0; shard < SHARD_COUNT; shard++) {
        if (!this.owned.has(shard) && rendezvous(shard, this.members) === this.id) wanted.push(shard);
      }
      await Promise.all(wanted.map(async (shard) => {
        const fence = await this.coordinator.acquireLease(this.leaseName(shard), this.id, LEASE_TTL_MS);
        if (fence === null) return; // its previous owner still holds it; retried next tick
        try {
          await this.shards.acquired(shard, fence);
          this.owned.set(shard, fence);
          this.ownerCache.delete(shard);
        } catch (err) {
          this.log.error({ err, shard }, 'cluster.acquire_failed');
          await this.coordinator.releaseLease(this.leaseName(shard), this.id, fence);
        }
      }));
    } catch (err) {
      this.log.warn({ err }, 'cluster.tick_failed');
    }
  }

  private async release(shard: number, fence: number): Promise<void> {
    this.owned.delete(shard);
    this.shards.released(shard);
    await this.coordinator.releaseLease(this.leaseName(shard), this.id, fence);
  }

  /** Who serves a shard now: this worker, another one, or nobody (between owners). */
  async ownerOf(shard: number, fresh = false): Promise<string | null> {
    if (this.owned.has(shard)) return this.id;
    const cached = this.ownerCache.get(shard);
    if (!fresh && cached && this.now() - cached.at < TICK_MS) return cached.holder;
    const lease = await this.coordinator.leaseHolder(this.leaseName(shard));
    if (lease) this.ownerCache.set(shard, { holder: lease.holder, at: this.now() });
    else this.ownerCache.delete(shard);
    return lease?.holder ?? null;
  }

  /**
   * Runs `op` on the owner of `shard`: here when we own it, else on the owner through a call.
   * Waits (bounded) through failover and handover, when a shard is briefly without an owner.
   * Past the deadline the caller gets 503 (Retry-After), never a 500.
   */
  async route<T>(shard: number, op: string, args: unknown, local: () => Promise<T>): Promise<T> {
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
          return (await this.callOwner(shard, owner, op, args, deadline)) as T;
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
   * holds the shard (up to the deadline). A call is never sent twice to the same owner: a slow or
   * starved owner may still be running the first one, and a second copy of a claim queued behind it
   * would answer the client with the first copy's effect. It is abandoned only when the lease moved
   * (the owner died or handed the shard over), and then the new owner is asked.
   */
  private async callOwner(shard: number, owner: string, op: string, args: unknown, deadline: number): Promise<unknown> {
    const { id, reply } = this.send(owner, op, args);
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
        if (r !== waiting) return r;
        if ((await this.ownerOf(shard, true)) !== owner) throw new OwnerMoved();
      }
    } finally {
      this.pending.delete(id);
    }
  }

  /** Publishes one request frame; the promise settles with the owner's reply (no timeout of its own). */
  private send(worker: string, op: string, args: unknown): { id: string; reply: Promise<unknown> } {
    const id = randomUUID();
    const reply = new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const frame: Frame = { t: 'req', id, from: this.id, op, args };
      this.coordinator.publish(`rpc:${worker}`, pack(frame)).catch((err: unknown) => {
        this.pending.delete(id);
        reject(err as Error);
      });
    });
    reply.catch(() => undefined); // settled after the caller gave up: nobody is listening any more
    return { id, reply };
  }

  private async onFrame(raw: Buffer): Promise<void> {
    let f: Frame;
    try {
      f = unpack(raw) as Frame;
    } catch {
      return;
    }
    if (f.t === 'res') {
      const p = this.pending.get(f.id);
      if (!p) return;
      this.pending.delete(f.id);
      if (f.ok) p.resolve(f.value);
      else p.reject(reviveError(f.error!));
      return;
    }
    let reply: Frame;
    try {
      const handler = this.handlers.get(f.op!);
      if (!handler) throw new Error(`no handler for ${f.op}`);
      reply = { t: 'res', id: f.id, from: this.id, ok: true, value: await handler(f.op!, f.args) };
    } catch (err) {
      const e = err as Error & { code?: string; shard?: number };
      reply = { t: 'res', id: f.id, from: this.id, ok: false, error: { name: e instanceof NotOwner ? 'NotOwner' : e.name, ...(e.code ? { code: e.code } : {}), message: e.message } };
    }
    await this.coordinator.publish(`rpc:${f.from}`, pack(reply)).catch((err: unknown) => this.log.warn({ err }, 'cluster.reply_failed'));
  }

  /**
   * Graceful leave: stop being a member, then hand every shard back (its state is already
   * durable, so the next owner loads it). Calls keep being answered until close().
   */
  async leave(): Promise<void> {
    this.leaving = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    await this.coordinator.hashDel('members', this.id);
    await Promise.all([...this.owned].map(([shard, fence]) => this.release(shard, fence)));
  }

  async close(): Promise<void> {
    if (!this.leaving) await this.leave();
    await this.unsub?.();
    for (const p of this.pending.values()) p.reject(new Error('cluster node closed'));
    this.pending.clear();
  }
}

/** The worker a call went to no longer holds the shard: ask the new owner. */
class OwnerMoved extends Error {}

/** No worker could serve the shard in time (failover under way, or the owner starved): retry later. */
function noOwner(): AppError {
  return new AppError('unavailable', undefined, { 'Retry-After': '3' });
}

/** Errors cross workers by name and code: a coded AppError on the owner is the same AppError here. */
function reviveError(e: { name: string; code?: string; message: string }): Error {
  if (e.name === 'NotOwner') return new NotOwner(-1);
  if (e.code && e.code in ERRORS) return new AppError(e.code as ErrorCode);
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}
