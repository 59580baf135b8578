// Cluster membership on the coordination port: each worker stamps itself into the `members` hash
// every tick; a stamp older than MEMBER_TTL_MS means the worker is gone (stamps ten times older
// are deleted). The live list is what rendezvous hashing assigns shards over.
import type { Coordinator } from './coordinator.js';

export const MEMBER_TTL_MS = 3_000;
const MEMBERS = 'members';

export class Membership {
  private live: string[] = [];

  constructor(
    private readonly coordinator: Coordinator,
    readonly id: string,
    private readonly now: () => number,
  ) {}

  get members(): readonly string[] {
    return this.live;
  }

  /** Stamps this worker (unless it is leaving) and reads who is alive. */
  async refresh(leaving: boolean): Promise<readonly string[]> {
    const now = this.now();
    if (!leaving) await this.coordinator.hashSet(MEMBERS, this.id, Buffer.from(String(now)));
    const stamps = await this.coordinator.hashGetAll(MEMBERS);
    const live: string[] = [];
    for (const [id, at] of stamps) {
      const age = now - Number(at.toString());
      if (age <= MEMBER_TTL_MS) live.push(id);
      else if (age > MEMBER_TTL_MS * 10) void this.coordinator.hashDel(MEMBERS, id).catch(() => undefined);
    }
    this.live = live.sort();
    return this.live;
  }

  /** Removes this worker's stamp (graceful leave). */
  async leave(): Promise<void> {
    await this.coordinator.hashDel(MEMBERS, this.id);
  }
}
