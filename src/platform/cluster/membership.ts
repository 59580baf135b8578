// Cluster membership on the coordination port: each worker stamps itself into the `members` hash
// every tick; a stamp older than MEMBER_TTL_MS means the worker is gone (stamps ten times older
// are deleted). Stamps and ages are the coordinator's clock (Redis TIME inside one script,
// Coordinator.memberRound), never a worker's: hosts whose clocks disagree still agree on who is
// alive. The live list is what rendezvous hashing assigns shards over. Next to its stamp a worker
// with a listener writes `<id>#addr` = `host:port`, where other workers call it directly
// (peer-transport.ts). The address has a field of its own so the stamp keeps its plain format:
// a build that predates addresses reads `#addr` fields as members with no valid stamp and skips them.
// A worker with a balancer route (AFFINITY_ROUTE) appends `|<route>` to that value, so any worker can
// name the worker that owns a session in its answer (X-Keywarden-Route).
//
// A worker that could not reach the coordinator for a while (a Redis restart or stall, a partition
// from it: a round that failed, or took over a second) comes back to stamps as old as its absence:
// every other worker's looks dead, although they were only as cut off as it was. For MEMBER_TTL_MS
// after such a round it keeps counting the members it saw live before (each has had a full
// time-to-live to stamp again by then), so no worker takes over the shards of another that is coming
// back at the same moment. A worker that really died during the outage is dropped that much later.
//
// Versions (rolling upgrades, docs/multi-host.md "Rolling upgrades"): a worker's id is
// `v<CLUSTER_VERSION>.<uuid>`, so the version travels wherever the id does: in membership, in every
// lease ("<holder>:<fence>"), in every frame's `from` and in the peer hello. A plain UUID is a build
// from before versions: the baseline, version 1. A behaviour that every member must share (the shard
// score, an operation's shape) changes only once the lowest version among the live members speaks
// it (ClusterNode.speaks); until then the old one holds.
import type { Coordinator } from './coordinator.js';
import { HASHES } from './names.js';

/**
 * The cluster protocol this build speaks. 1: the baseline (builds without a version). 2: expired
 * frames are answered 503 at once, deadlines in monotonic cluster time, versions in ids.
 */
export const CLUSTER_VERSION = 2;

/** The cluster version of a member, from its id: a plain id (no `v<N>.` prefix) is the baseline. */
export function versionOf(id: string): number {
  const m = /^v(\d{1,4})\./.exec(id);
  return m ? Number(m[1]) : 1;
}

export const MEMBER_TTL_MS = 3_000;
/** A round that took this long (the coordinator stalled) was an absence from it, as a failed one was. */
const MEMBER_ABSENCE_MS = 1_000;
const MEMBERS = HASHES.members;
const ADDR = '#addr';

export class Membership {
  private live: string[] = [];
  private addresses = new Map<string, string>();
  private routes = new Map<string, string>();
  /** This worker's `host:port` for direct calls, once it listens. */
  address: string | undefined;
  /** The last round failed: the coordinator could not be reached. */
  private unreachable = false;
  /** Until when members live before an absence are counted live (see the head of this file). */
  private holdUntil = 0;

  constructor(
    private readonly coordinator: Coordinator,
    readonly id: string,
    /** This worker's balancer route, or undefined. */
    readonly route?: string,
    /** A monotonic clock, ms (tests move one by hand). */
    private readonly now: () => number = () => performance.now(),
  ) {}

  get members(): readonly string[] {
    return this.live;
  }

  /** The lowest cluster version among the live members and this worker: what all of them speak. */
  get version(): number {
    let v = versionOf(this.id);
    for (const m of this.live) v = Math.min(v, versionOf(m));
    return v;
  }

  /** A live member's advertised address (as of the last refresh). */
  addressOf(id: string): string | undefined {
    return this.addresses.get(id);
  }

  /** A live member's balancer route (this worker's own at once). */
  routeOf(id: string): string | undefined {
    return id === this.id ? this.route : this.routes.get(id);
  }

  /** Stamps this worker (unless it is leaving) and reads who is alive and where. */
  async refresh(leaving: boolean): Promise<readonly string[]> {
    const advertised = this.route ? `${this.address ?? ''}|${this.route}` : this.address;
    const started = this.now();
    let live: readonly { id: string; address: string | undefined }[];
    try {
      live = await this.coordinator.memberRound(
        MEMBERS,
        leaving ? null : { id: this.id, address: advertised },
        MEMBER_TTL_MS,
      );
    } catch (err) {
      this.unreachable = true;
      throw err;
    }
    const now = this.now();
    if (this.unreachable || now - started > MEMBER_ABSENCE_MS) this.holdUntil = now + MEMBER_TTL_MS;
    this.unreachable = false;
    const ids = live.map((m) => m.id);
    const addresses = new Map<string, string>();
    const routes = new Map<string, string>();
    for (const m of live) {
      if (!m.address) continue;
      const bar = m.address.indexOf('|');
      const address = bar < 0 ? m.address : m.address.slice(0, bar);
      if (address) addresses.set(m.id, address);
      if (bar >= 0 && bar < m.address.length - 1) routes.set(m.id, m.address.slice(bar + 1));
    }
    if (now < this.holdUntil) {
      // Held: the members live before the absence that the round did not return, as they were.
      for (const id of this.live) {
        if (id === this.id || ids.includes(id)) continue;
        ids.push(id);
        const address = this.addresses.get(id);
        const route = this.routes.get(id);
        if (address !== undefined) addresses.set(id, address);
        if (route !== undefined) routes.set(id, route);
      }
    }
    this.live = ids.sort();
    this.addresses = addresses;
    this.routes = routes;
    return this.live;
  }

  /** Removes this worker's stamp and address (graceful leave). */
  async leave(): Promise<void> {
    await Promise.all([this.coordinator.hashDel(MEMBERS, this.id), this.coordinator.hashDel(MEMBERS, this.id + ADDR)]);
  }
}
