// Floating seats (docs/protocol.md 12.2): a key's live heartbeat sessions are bounded by its max_sessions.
// The decision runs on the worker that owns the KEY's shard (shardOf(licenseId), like license
// operations), one start at a time per key (a queue per key), so two starts on different workers
// never both take the last seat. A key's seat table (session, when claimed) lives in the
// coordinator's hash `seats:<shard>`, written under the shard lease's fence: a new owner after a
// failover continues from it, and a stale owner's write is refused. Whether a seat is still held is
// read from the heartbeat sessions themselves (docs/spec.md "Session alive"), so stop, kill and expiry free a
// seat even when their release never reached the table. Without Redis the table is rebuilt from
// the heartbeat sessions the restart checkpoint brought back.
import { HASHES, unpack } from '../../platform/cluster/names.js';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { NotOwner, shardOf, type ShardNode } from '../../platform/cluster/cluster-node.js';
import { sessionAlive, type HeartbeatContext } from './heartbeat.machine.js';
import type { HeartbeatOps, SeatClaimArgs, SeatClaimOutcome } from './heartbeat.owner.js';

/** Where a shard's seat tables are kept (one field per key). */
const seatsOf = HASHES.seats;

/**
 * A seat claimed by a start whose heartbeat session does not exist yet counts for this long (the
 * start runs right after the claim; a start that died in between frees its seat after this).
 */
const PENDING_MS = 15_000;

/** A key's seats: session -> when it was claimed (ms). */
type Table = Map<string, number>;

interface SeatKeeperDeps {
  now: () => number;
  log: Logger;
  coordinator: Coordinator;
  node: ShardNode<HeartbeatOps>;
  /** A heartbeat session's current state, wherever it lives; undefined when there is none. */
  stateOf: (session: string) => Promise<HeartbeatContext | undefined>;
  /** Ends a session because its seat went to a newer start (on the session's owner); false when it had none. */
  kick: (session: string) => Promise<boolean>;
}

interface Held {
  session: string;
  claimedAt: number;
  /** The session's last beat (the start counts as one); null while it is only claimed. */
  lastBeatAt: number | null;
  context: HeartbeatContext | undefined;
}

/**
 * A key's seat table as stored: a marker byte, the number of records (u32 LE), then one record per
 * claim: the session's length (u8), the session (latin1) and when it was claimed (f64 LE, ms). A
 * session's later record supersedes its earlier one, so a claim on an unlimited key appends its record
 * (a copy of the bytes, no decoding) and the next tidying writes the table afresh. Tables written
 * before this layout are msgpack arrays [session, at, ...] and are still read.
 */
const TABLE_MARK = 0xf1;
const HEADER = 5;

function decodeTable(raw: Buffer | null): Table {
  const t: Table = new Map();
  if (!raw || raw.length === 0) return t;
  if (raw[0] !== TABLE_MARK) return decodeLegacy(raw);
  for (let at = HEADER; at < raw.length;) {
    const len = raw[at]!;
    if (at + 1 + len + 8 > raw.length) throw new Error('seat table truncated');
    t.set(raw.toString('latin1', at + 1, at + 1 + len), raw.readDoubleLE(at + 1 + len));
    at += 1 + len + 8;
  }
  return t;
}

function decodeLegacy(raw: Buffer): Table {
  const t: Table = new Map();
  const flat = unpack(raw) as unknown;
  if (!Array.isArray(flat)) return t;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const [s, at] = [flat[i] as unknown, flat[i + 1] as unknown];
    if (typeof s === 'string' && typeof at === 'number') t.set(s, at);
  }
  return t;
}

function record(session: string, at: number): Buffer {
  // Session tokens are 43 characters of base64url (client-sessions.ts); the length byte holds 255.
  const len = session.length;
  if (len > 255) throw new Error('seat table: a session token longer than 255 characters');
  const b = Buffer.allocUnsafe(1 + len + 8);
  b[0] = len;
  b.write(session, 1, 'latin1');
  b.writeDoubleLE(at, 1 + len);
  return b;
}

function encodeTable(t: Table): Buffer | null {
  if (t.size === 0) return null;
  const header = Buffer.alloc(HEADER);
  header[0] = TABLE_MARK;
  header.writeUInt32LE(t.size, 1);
  const parts: Buffer[] = [header];
  for (const [s, at] of t) parts.push(record(s, at));
  return Buffer.concat(parts);
}

/** Records in a stored table (a superseded claim counts too); undefined for a legacy table. */
function recordsIn(raw: Buffer | null): number | undefined {
  if (!raw || raw.length === 0) return 0;
  return raw[0] === TABLE_MARK && raw.length >= HEADER ? raw.readUInt32LE(1) : undefined;
}

/**
 * Tables this process allocated, with room after their records: an append writes there instead of
 * copying the table into a new buffer each claim (a site license's table is tens of KB, and
 * reallocating it per start left that much freed memory behind per start). Only a table whose
 * memory is its own is ever written past its end: Node's small buffers share a pool.
 */
const roomy = new WeakSet<ArrayBufferLike>();

/**
 * The stored table with one more record, and whether it held `session` already (its record is then
 * superseded); undefined when the stored table is malformed (the caller reads it the long way).
 */
function appended(raw: Buffer | null, session: string, at: number): { table: Buffer; had: boolean } | undefined {
  const rec = record(session, at);
  if (!raw || raw.length === 0) return { table: encodeTable(new Map([[session, at]]))!, had: false };
  // Walk the records: a session's record is its length byte and its characters at a record's start.
  const had = holds(raw, rec.subarray(0, 1 + rec[0]!));
  if (had === undefined) return undefined;
  const length = raw.length + rec.length;
  let table: Buffer;
  if (roomy.has(raw.buffer) && raw.byteOffset + length <= raw.buffer.byteLength) {
    // Past the stored view's end: nobody reads there (a write that fails leaves that room unused).
    table = Buffer.from(raw.buffer, raw.byteOffset, length);
  } else {
    table = Buffer.allocUnsafeSlow(Math.max(Math.ceil(length * 1.25), 1024)).subarray(0, length);
    roomy.add(table.buffer);
    raw.copy(table);
  }
  rec.copy(table, raw.length);
  // In place when the table has room: the stored view sees the new count before the write lands,
  // which only moves its next tidying one claim earlier should the write be refused.
  table.writeUInt32LE(raw.readUInt32LE(1) + 1, 1);
  return { table, had };
}

/**
 * Whether a table's records include one for the session whose length byte and bytes are `head`. The
 * records' first two characters are compared in JavaScript and only a record that passes is compared
 * whole (a native call): a site license's table of 15,000 records is walked in tens of microseconds.
 */
function holds(raw: Buffer, head: Buffer): boolean | undefined {
  const len = head[0]!;
  const c1 = head[1];
  const c2 = head[2];
  for (let at = HEADER; at < raw.length; at += 1 + raw[at]! + 8) {
    if (at + 1 + raw[at]! + 8 > raw.length) return undefined; // a record cut short: not a table to append to
    // (A session shorter than two characters has fewer to compare: the rest would be the timestamp.)
    if (raw[at] !== len || (len > 0 && raw[at + 1] !== c1) || (len > 1 && raw[at + 2] !== c2)) continue;
    if (raw.compare(head, 1, head.length, at + 1, at + head.length) === 0) return true;
  }
  return false;
}

export class SeatKeeper {
  /** The tail of each key's queue: one claim or release at a time per key on this worker. */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Size of each key's table after its last pruning (an unlimited key is pruned as it doubles). */
  private readonly prunedSize = new Map<string, number>();

  constructor(private readonly d: SeatKeeperDeps) {
    d.node.handle('seat.claim', (a) => this.claimHere(a));
    d.node.handle('seat.release', (a) => this.releaseHere(a.licenseId, a.session));
  }

  /** Takes a seat of the key for `session` on the key's owner (kicking or refusing per the policy). */
  claim(a: SeatClaimArgs): Promise<SeatClaimOutcome> {
    return this.d.node.route(shardOf(a.licenseId), 'seat.claim', a, () => this.claimHere(a));
  }

  /** Gives a session's seat back (stop, kill, expiry); false when it held none. */
  release(licenseId: string, session: string): Promise<boolean> {
    return this.d.node.route(shardOf(licenseId), 'seat.release', { licenseId, session }, () =>
      this.releaseHere(licenseId, session),
    );
  }

  /** Releases without waiting; a lost release only leaves a dead entry that the next claim prunes. */
  releaseLater(licenseId: string | null, session: string): void {
    if (!licenseId) return;
    this.release(licenseId, session).catch((err: unknown) =>
      this.d.log.warn({ err, licenseId }, 'heartbeat.seat_release_failed'),
    );
  }

  /** Live heartbeat sessions of each key (key rows' live_sessions); read from any worker. */
  async liveCounts(licenseIds: readonly string[]): Promise<Map<string, number>> {
    const now = this.d.now();
    const out = new Map<string, number>();
    await Promise.all(
      licenseIds.map(async (id) => {
        const t = await this.read(id);
        let n = 0;
        for (const s of t.keys()) {
          const c = await this.d.stateOf(s);
          if (c && c.licenseId === id && sessionAlive(c, now)) n++;
        }
        out.set(id, n);
      }),
    );
    return out;
  }

  /** Without Redis, after the restart checkpoint: every restored session takes its key's seat back. */
  async rebuild(contexts: Iterable<HeartbeatContext>): Promise<number> {
    const byKey = new Map<string, Table>();
    for (const c of contexts) {
      if (!c.licenseId) continue;
      let t = byKey.get(c.licenseId);
      if (!t) byKey.set(c.licenseId, (t = new Map()));
      t.set(c.session, c.startedAt);
    }
    for (const [id, t] of byKey) await this.d.coordinator.hashSet(seatsOf(shardOf(id)), id, encodeTable(t)!);
    return byKey.size;
  }

  // ---- on the key's owner -----------------------------------------------------------------------

  private queued<T>(licenseId: string, run: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(licenseId) ?? Promise.resolve()).then(run);
    const tail = result.catch(() => undefined);
    this.tails.set(licenseId, tail);
    void tail.then(() => {
      if (this.tails.get(licenseId) === tail) this.tails.delete(licenseId);
    });
    return result;
  }

  private fence(licenseId: string): number {
    const shard = shardOf(licenseId);
    const fence = this.d.node.fenceOf(shard);
    if (fence === undefined) throw new NotOwner(shard);
    return fence;
  }

  private readRaw(licenseId: string): Promise<Buffer | null> {
    return this.d.coordinator.hashGet(seatsOf(shardOf(licenseId)), licenseId);
  }

  private async read(licenseId: string): Promise<Table> {
    return this.decoded(licenseId, await this.readRaw(licenseId));
  }

  private decoded(licenseId: string, raw: Buffer | null): Table {
    try {
      return decodeTable(raw);
    } catch (err) {
      // A table this build cannot read is dropped (the sessions themselves stay): a corrupt entry
      // must not lock a key out forever.
      this.d.log.error({ err, licenseId }, 'heartbeat.seat_table_unreadable');
      return new Map();
    }
  }

  private write(licenseId: string, fence: number, t: Table): Promise<void> {
    return this.writeRaw(licenseId, fence, encodeTable(t));
  }

  private async writeRaw(licenseId: string, fence: number, table: Buffer | null): Promise<void> {
    const shard = shardOf(licenseId);
    const ok = await this.d.coordinator.fencedHashSet(
      this.d.node.leaseName(shard),
      this.d.node.id,
      fence,
      seatsOf(shard),
      licenseId,
      table,
    );
    if (!ok) throw new NotOwner(shard);
  }

  async claimHere(a: SeatClaimArgs): Promise<SeatClaimOutcome> {
    this.fence(a.licenseId);
    return this.queued(a.licenseId, async () => {
      const fence = this.fence(a.licenseId);
      const raw = await this.readRaw(a.licenseId);
      const now = this.d.now();
      // An unlimited key between two tidyings: the claim is appended, nothing is decoded.
      const records = recordsIn(raw);
      const next =
        a.max <= 0 && records !== undefined && records < 2 * (this.prunedSize.get(a.licenseId) ?? 0) + 16
          ? appended(raw, a.session, now)
          : undefined;
      if (next) {
        await this.writeRaw(a.licenseId, fence, next.table);
        return { added: !next.had, kicked: [] };
      }
      const t = this.decoded(a.licenseId, raw);
      if (t.has(a.session) && !(a.max > 0 && t.size > a.max)) {
        // A restart of a session that holds its seat already (its heartbeat ended without a release).
        t.set(a.session, now);
        await this.write(a.licenseId, fence, t);
        return { added: false, kicked: [] };
      }
      // Over a bound lowered since: the session claims anew like any other.
      t.delete(a.session);
      const kicked: SeatClaimOutcome['kicked'] = [];
      const bounded = a.max > 0 && t.size >= a.max;
      if (bounded || t.size >= 2 * (this.prunedSize.get(a.licenseId) ?? 0) + 16) {
        const { held, dormant } = await this.held(a.licenseId, t, now, bounded);
        if (held.length + dormant.length > 0) this.prunedSize.set(a.licenseId, held.length + dormant.length);
        else this.prunedSize.delete(a.licenseId);
        while (a.max > 0 && held.length >= a.max) {
          // Only a session that exists can be ended; seats claimed a moment ago by a start under way stay.
          const victims = held.filter((h) => h.lastBeatAt !== null);
          if (a.overflow === 'reject' || victims.length === 0) {
            await this.write(a.licenseId, fence, new Map([...held, ...dormant].map((h) => [h.session, h.claimedAt])));
            throw new AppError('session_limit');
          }
          const oldest = victims.reduce((x, y) => (y.lastBeatAt! < x.lastBeatAt! ? y : x));
          held.splice(held.indexOf(oldest), 1);
          // The victim ends before the new session starts: at no moment are both alive.
          if (await this.d.kick(oldest.session)) {
            kicked.push({ session: oldest.session, userId: oldest.context?.userId ?? null });
          }
        }
        t.clear();
        for (const h of [...held, ...dormant]) t.set(h.session, h.claimedAt);
      }
      t.set(a.session, now);
      await this.write(a.licenseId, fence, t);
      return { added: true, kicked };
    });
  }

  /**
   * The seats of a table still held: a live session, or a claim of a start under way. A session that
   * exists but is no longer alive holds no seat: at the bound it is ended (a late beat could bring it
   * back over the bound); below it (an unlimited key tidying its table) it stays, dormant, as docs/spec.md
   * lets a late session beat on.
   */
  private async held(
    licenseId: string,
    t: Table,
    now: number,
    bounded: boolean,
  ): Promise<{ held: Held[]; dormant: Held[] }> {
    const out: Held[] = [];
    const dormant: Held[] = [];
    const entries = [...t];
    const states = await Promise.all(entries.map(([s]) => this.d.stateOf(s)));
    for (let i = 0; i < entries.length; i++) {
      const [session, claimedAt] = entries[i]!;
      const c = states[i];
      if (c && c.licenseId === licenseId && sessionAlive(c, now)) {
        out.push({ session, claimedAt, lastBeatAt: c.lastBeatAt, context: c });
      } else if (!c && now - claimedAt < PENDING_MS) {
        out.push({ session, claimedAt, lastBeatAt: null, context: undefined });
      } else if (c && c.licenseId === licenseId && c.expiresAt > now) {
        if (bounded) await this.d.kick(session);
        else dormant.push({ session, claimedAt, lastBeatAt: c.lastBeatAt, context: c });
      }
    }
    return { held: out, dormant };
  }

  async releaseHere(licenseId: string, session: string): Promise<boolean> {
    this.fence(licenseId);
    return this.queued(licenseId, async () => {
      const fence = this.fence(licenseId);
      const t = await this.read(licenseId);
      if (!t.delete(session)) return false;
      if (t.size === 0) this.prunedSize.delete(licenseId);
      await this.write(licenseId, fence, t);
      return true;
    });
  }
}
