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
import type { Coordinator } from './coordinator.js';

export const MEMBER_TTL_MS = 3_000;
const MEMBERS = 'members';
const ADDR = '#addr';

export class Membership {
  private live: string[] = [];
  private addresses = new Map<string, string>();
  private routes = new Map<string, string>();
  /** This worker's `host:port` for direct calls, once it listens. */
  address: string | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    readonly id: string,
    /** This worker's balancer route, or undefined. */
    readonly route?: string,
  ) {}

  get members(): readonly string[] {
    return this.live;
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
    const live = await this.coordinator.memberRound(
      MEMBERS,
      leaving ? null : { id: this.id, address: advertised },
      MEMBER_TTL_MS,
    );
    this.live = live.map((m) => m.id).sort();
    const addresses = new Map<string, string>();
    const routes = new Map<string, string>();
    for (const m of live) {
      if (!m.address) continue;
      const bar = m.address.indexOf('|');
      const address = bar < 0 ? m.address : m.address.slice(0, bar);
      if (address) addresses.set(m.id, address);
      if (bar >= 0 && bar < m.address.length - 1) routes.set(m.id, m.address.slice(bar + 1));
    }
    this.addresses = addresses;
    this.routes = routes;
    return this.live;
  }

  /** Removes this worker's stamp and address (graceful leave). */
  async leave(): Promise<void> {
    await Promise.all([this.coordinator.hashDel(MEMBERS, this.id), this.coordinator.hashDel(MEMBERS, this.id + ADDR)]);
  }
}
