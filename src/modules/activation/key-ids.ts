// A license key's id by its keyed hash, remembered per worker: every `license` call names its key
// by the key itself, and the id (what the key's actor and shard are keyed by) needs no round trip
// once known. Nothing can make a remembered id wrong but the key's deletion: a key's hash and id
// never change, and ids (UUIDs) are never reused. So there is nothing to invalidate: a caller
// whose remembered id names no key any more forgets it and looks again (the same key string may
// have been imported anew under another id). Misses are not remembered (a key generated a moment
// later must be found); the map is bounded, the oldest entry leaving first.

const MAX_ENTRIES = 100_000;

interface FoundKey {
  id: string;
  /** From memory: the key may have been deleted since (see forget). */
  remembered: boolean;
}

export class KeyIds {
  private readonly ids = new Map<string, string>();

  constructor(
    private readonly lookup: (appId: string, keyHash: string) => Promise<string | undefined>,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  get size(): number {
    return this.ids.size;
  }

  async find(appId: string, keyHash: string): Promise<FoundKey | undefined> {
    const name = `${appId}:${keyHash}`;
    const id = this.ids.get(name);
    if (id !== undefined) return { id, remembered: true };
    const found = await this.lookup(appId, keyHash);
    if (found === undefined) return undefined;
    if (this.ids.size >= this.maxEntries) this.ids.delete(this.ids.keys().next().value!);
    this.ids.set(name, found);
    return { id: found, remembered: false };
  }

  /** Forgets a remembered id that named no key. */
  forget(appId: string, keyHash: string): void {
    this.ids.delete(`${appId}:${keyHash}`);
  }
}
