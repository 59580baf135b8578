// The relay's seat leases (docs/air-gapped.md "Leases"): held in memory, kept on disk in DIR as a
// snapshot (leases.json, replaced atomically: temporary file, fsync, rename) plus a journal of changes
// since (leases.journal, one JSON line each, appended in batches). A restart replays the journal over
// the snapshot, so leases survive it; the journal is folded into a new snapshot at start, every minute
// and when it grows. Journal lines are set/delete operations: replaying one twice changes nothing.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { randomToken } from '../../../platform/crypto/index.js';

const LEASE_MS = 15 * 60_000;
const SNAPSHOT = 'leases.json';
const JOURNAL = 'leases.journal';
const COMPACT_BYTES = 8 * 1024 * 1024;
const COMPACT_EVERY_MS = 60_000;

export interface Lease {
  id: string;
  hwid: string;
  expiresAt: number;
}

type Entry = ['p', string, string, number] | ['d', string];

interface Batch {
  lines: string[];
  done: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface StoreOptions {
  dir: string;
  /** Leases of another license (a new pool) are not carried over. */
  licenseId: string;
  now: () => number;
}

export class LeaseStore {
  private readonly byId = new Map<string, Lease>();
  private readonly byHwid = new Map<string, Lease>();
  private batch: Batch | undefined;
  private chain: Promise<void> = Promise.resolve();
  private journalBytes = 0;
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly o: StoreOptions,
    private journal: fsp.FileHandle,
  ) {}

  /** Reads what a previous run left, drops expired leases, and starts a fresh journal. */
  static async open(o: StoreOptions): Promise<LeaseStore> {
    await fsp.mkdir(o.dir, { recursive: true });
    const store = new LeaseStore(o, await fsp.open(path.join(o.dir, JOURNAL), 'a'));
    store.load();
    await store.compact();
    store.timer = setInterval(() => {
      store.sweep();
      if (store.dirty) store.chain = store.chain.then(() => store.compact()).catch(() => undefined);
    }, COMPACT_EVERY_MS).unref();
    return store;
  }

  private load(): void {
    let snapshot: { license_id?: string; leases?: [string, string, number][] } = {};
    try {
      snapshot = JSON.parse(fs.readFileSync(path.join(this.o.dir, SNAPSHOT), 'utf8')) as typeof snapshot;
    } catch {
      // none yet, or unreadable: the journal alone (or nothing) is what there is
    }
    const sameLicense = snapshot.license_id === undefined || snapshot.license_id === this.o.licenseId;
    if (sameLicense) for (const [id, hwid, exp] of snapshot.leases ?? []) this.put({ id, hwid, expiresAt: exp });
    let journal = '';
    try {
      journal = fs.readFileSync(path.join(this.o.dir, JOURNAL), 'utf8');
    } catch {
      // no journal
    }
    if (sameLicense) {
      for (const line of journal.split('\n')) {
        if (!line) continue;
        let e: Entry;
        try {
          e = JSON.parse(line) as Entry;
        } catch {
          continue; // a line cut short by a crash
        }
        if (e[0] === 'p') this.put({ id: e[1], hwid: e[2], expiresAt: e[3] });
        else if (e[0] === 'd') this.drop(e[1]);
      }
    }
    this.sweep();
  }

  private put(l: Lease): void {
    const before = this.byHwid.get(l.hwid);
    if (before && before.id !== l.id) this.byId.delete(before.id);
    this.byId.set(l.id, l);
    this.byHwid.set(l.hwid, l);
  }

  private drop(id: string): Lease | undefined {
    const l = this.byId.get(id);
    if (!l) return undefined;
    this.byId.delete(id);
    if (this.byHwid.get(l.hwid) === l) this.byHwid.delete(l.hwid);
    return l;
  }

  /** Drops every expired lease (without journaling: an expired lease reads as absent anyway). */
  sweep(): void {
    const now = this.o.now();
    for (const l of this.byId.values()) if (l.expiresAt <= now) this.drop(l.id);
  }

  /** Live leases. */
  inUse(): number {
    this.sweep();
    return this.byId.size;
  }

  leases(): readonly Lease[] {
    this.sweep();
    return [...this.byId.values()];
  }

  /**
   * The HWID's lease, renewed when it holds one; else a new one while fewer than `seats` are live;
   * null when none is free. Resolves once the change is on disk.
   */
  async acquire(hwid: string, seats: number): Promise<Lease | null> {
    const now = this.o.now();
    const held = this.byHwid.get(hwid);
    if (held && held.expiresAt > now) return this.extend(held, now);
    if (held) this.drop(held.id);
    if (this.byId.size >= seats) {
      this.sweep();
      if (this.byId.size >= seats) return null;
    }
    const lease = { id: randomToken(16), hwid, expiresAt: now + LEASE_MS };
    this.put(lease);
    await this.record(['p', lease.id, hwid, lease.expiresAt]);
    return { ...lease };
  }

  /** null: no live lease of that id. */
  async renew(id: string): Promise<Lease | null> {
    const now = this.o.now();
    const l = this.byId.get(id);
    if (!l) return null;
    if (l.expiresAt <= now) {
      this.drop(id);
      return null;
    }
    return this.extend(l, now);
  }

  private async extend(l: Lease, now: number): Promise<Lease> {
    l.expiresAt = now + LEASE_MS;
    await this.record(['p', l.id, l.hwid, l.expiresAt]);
    return { ...l };
  }

  /** false: no live lease of that id. */
  async release(id: string): Promise<boolean> {
    const l = this.drop(id);
    if (!l) return false;
    await this.record(['d', id]);
    return l.expiresAt > this.o.now();
  }

  /** Every change of one turn of the event loop goes to the journal in one write. */
  private record(e: Entry): Promise<void> {
    this.dirty = true;
    if (!this.batch) {
      let resolve!: () => void;
      let reject!: (err: unknown) => void;
      const done = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      const b: Batch = { lines: [], done, resolve, reject };
      this.batch = b;
      this.chain = this.chain.then(() => this.writeBatch(b));
    }
    this.batch.lines.push(`${JSON.stringify(e)}\n`);
    return this.batch.done;
  }

  private async writeBatch(b: Batch): Promise<void> {
    if (this.batch === b) this.batch = undefined;
    try {
      const text = b.lines.join('');
      await this.journal.write(text);
      this.journalBytes += text.length;
      if (this.journalBytes > COMPACT_BYTES) await this.compact();
      b.resolve();
    } catch (err) {
      b.reject(err);
    }
  }

  /** The live leases as the new snapshot (atomically), then an empty journal. */
  private async compact(): Promise<void> {
    this.sweep();
    this.dirty = false;
    const leases = [...this.byId.values()].map((l) => [l.id, l.hwid, l.expiresAt]);
    const file = path.join(this.o.dir, SNAPSHOT);
    const tmp = `${file}.${process.pid}.tmp`;
    const h = await fsp.open(tmp, 'w');
    try {
      await h.writeFile(JSON.stringify({ v: 1, license_id: this.o.licenseId, leases }));
      await h.sync();
    } finally {
      await h.close();
    }
    await fsp.rename(tmp, file);
    const dir = await fsp.open(this.o.dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    await this.journal.truncate(0);
    this.journalBytes = 0;
  }

  /** Waits for pending writes and leaves a fresh snapshot. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.chain.catch(() => undefined);
    await this.compact();
    await this.journal.close();
  }
}
