// Cluster membership on the coordination port: each worker stamps itself into the `members` hash
// every tick; a stamp older than MEMBER_TTL_MS means the worker is gone (stamps ten times older
// are deleted). The live list is what rendezvous hashing assigns shards over. Next to its stamp a
// worker with a listener writes `<id>#addr` = `host:port`, where other workers call it directly
// (peer-transport.ts). The address has a field of its own so the stamp keeps its plain format:
// a build that predates addresses reads `#addr` fields as members with no valid stamp and skips them.
import type { Coordinator } from './coordinator.js';

export const MEMBER_TTL_MS = 3_000;
const MEMBERS = 'members';
const ADDR = '#addr';

export class Membership {
  private live: string[] = [];
  private addresses = new Map<string, string>();
  /** This worker's `host:port` for direct calls, once it listens. */
  address: string | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    readonly id: string,
    private readonly now: () => number,
  ) {}

  get members(): readonly string[] {
    return this.live;
  }

  /** A live member's advertised address (as of the last refresh). */
  addressOf(id: string): string | undefined {
    return this.addresses.get(id);
  }

  /** Stamps this worker (unless it is leaving) and reads who is alive and where. */
  async refresh(leaving: boolean): Promise<readonly string[]> {
    const now = this.now();
    if (!leaving) {
      // Issued in one turn, so they share a round trip; the address goes first.
      await Promise.all([
        this.address ? this.coordinator.hashSet(MEMBERS, this.id + ADDR, Buffer.from(this.address)) : undefined,
        this.coordinator.hashSet(MEMBERS, this.id, Buffer.from(String(now))),
      ]);
    }
    const fields = await this.coordinator.hashGetAll(MEMBERS);
    const live: string[] = [];
    const addresses = new Map<string, string>();
    for (const [field, value] of fields) {
      if (field.endsWith(ADDR)) continue;
      const age = now - Number(value.toString());
      if (age <= MEMBER_TTL_MS) {
        live.push(field);
        const address = fields.get(field + ADDR);
        if (address) addresses.set(field, address.toString());
      } else if (age > MEMBER_TTL_MS * 10) {
        void this.coordinator.hashDel(MEMBERS, field).catch(() => undefined);
        if (fields.has(field + ADDR)) void this.coordinator.hashDel(MEMBERS, field + ADDR).catch(() => undefined);
      }
    }
    this.live = live.sort();
    this.addresses = addresses;
    return this.live;
  }

  /** Removes this worker's stamp and address (graceful leave). */
  async leave(): Promise<void> {
    await Promise.all([this.coordinator.hashDel(MEMBERS, this.id), this.coordinator.hashDel(MEMBERS, this.id + ADDR)]);
  }
}
