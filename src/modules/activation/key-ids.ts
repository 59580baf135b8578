// A license key's id by its keyed hash, remembered per worker: every `license` call names its key
// by the key itself, and the id (what the key's actor and shard are keyed by) needs no round trip
// once known. Nothing can make a remembered id wrong but the key's deletion: a key's hash and id
// never change, and ids (UUIDs) are never reused. So there is nothing to invalidate: a caller
// whose remembered id names no key any more forgets it and looks again (the same key string may
// have been imported anew under another id). Misses are not remembered (a key generated a moment
// later must be found); the map is bounded, the oldest entry leaving first.

const MAX_ENTRIES = 100_000;

export class KeyIds {
  private readonly ids = new Map<string, string>();

  constructor(private readonly lookup: (appId: string, keyHash: string) => Promise<string | undefined>) {}

  /**
   * Runs `run` with the key's id (undefined when the app has no such key). A remembered id that
   * names no key any more (`gone(err)` for what `run` threw) is forgotten and looked up again,
   * once: the same key string may live on under a new id.
   */
  async run<T>(
    appId: string,
    keyHash: string,
    run: (id: string) => Promise<T>,
    gone: (err: unknown) => boolean,
  ): Promise<{ id: string; value: T } | undefined> {
    const name = `${appId}:${keyHash}`;
    const remembered = this.ids.get(name);
    if (remembered !== undefined) {
      try {
        return { id: remembered, value: await run(remembered) };
      } catch (err) {
        if (!gone(err)) throw err;
        this.ids.delete(name);
        const again = await this.lookup(appId, keyHash);
        if (again === undefined || again === remembered) throw err;
        this.remember(name, again);
        return { id: again, value: await run(again) };
      }
    }
    const found = await this.lookup(appId, keyHash);
    if (found === undefined) return undefined;
    this.remember(name, found);
    return { id: found, value: await run(found) };
  }

  private remember(name: string, id: string): void {
    if (this.ids.size >= MAX_ENTRIES) this.ids.delete(this.ids.keys().next().value!);
    this.ids.set(name, id);
  }
}
