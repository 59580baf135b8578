// Passivated heartbeat contexts, packed, to keep a live session within 2 KB. As plain objects
// they cost about 850 bytes each: an object with an out-of-object property array, three boxed
// timestamps, a token string, and ids that msgpackr decoded as slices of the whole session record
// (which kept the record alive). Here a context is one slot of fixed width in three typed arrays
// (numbers; token, userId and licenseId as 16 bytes each, the device's hwidHash as 8), its appId and code hash interned
// (shared by a fleet), its systemId and session the only strings of its own. A context whose
// fields do not have these shapes (a token that is not TT + 32 lowercase hex digits, an id that is
// not a lowercase UUID, an unknown version) is kept as it is, so every context comes back exactly.
// Slots are threaded into one list per group (the cluster shard), so a released shard's sessions
// are dropped without a scan.
import { HEARTBEAT_SNAPSHOT_VERSION, type BeatVerdict, type HeartbeatContext } from './heartbeat.machine.js';

/** What sessions can be looked up by without decoding them. */
export type ContextKey = 'appId' | 'userId' | 'licenseId';

// Float64 fields of a slot.
const F_LAST_INDEX = 0;
const F_COUNT = 1;
const F_LAST_AT = 2;
const F_STARTED = 3;
const F_EXPIRES = 4;
const F_CODE_SIZE = 5;
const F = 6;
// Uint32 fields of a slot. PREV and NEXT are slot + 1 (0: none); NEXT also threads free slots.
const U_APP = 0;
const U_CODE_HASH = 1;
const U_INTERVAL = 2;
const U_WARNINGS = 3;
const U_FLAGS = 4;
const U_GROUP = 5;
const U_PREV = 6;
const U_NEXT = 7;
const U = 8;
// Bytes of a slot.
const B_TOKEN = 0;
const B_USER = 16;
const B_LICENSE = 32;
const B_HWID = 48;
const B = 56;

const HAS_USER = 1;
const HAS_LICENSE = 2;
const HAS_CODE_SIZE = 4;
const HAS_HWID = 8;
/** Bits 8-15 of the flags: the index of `last` in VERDICTS + 1 (0: null). */
const LAST_SHIFT = 8;

/** The verdicts a session that is still alive can carry from its last event. */
const VERDICTS: readonly BeatVerdict[] = [
  { kind: 'accepted', drift: false },
  { kind: 'accepted', drift: true },
  { kind: 'rejected', reason: 'token' },
  { kind: 'rejected', reason: 'replay' },
  { kind: 'stop_refused' },
];

const MIN_SLOTS = 1024;

const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Lowercase hex digit values by char code; -1 for anything else (uppercase would not come back the same). */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) HEX_VALUE[HEX[i]!] = i;
const DASHES = [8, 13, 18, 23];
const scratch = Buffer.allocUnsafeSlow(64);

/** Writes `count` bytes of hex digits from s[at..] into bytes[off..]; false on anything but lowercase hex. */
function parseHex(s: string, at: number, bytes: Uint8Array, off: number, count: number): boolean {
  for (let i = 0; i < count; i++) {
    const hi = HEX_VALUE[s.charCodeAt(at + 2 * i)] ?? -1;
    const lo = HEX_VALUE[s.charCodeAt(at + 2 * i + 1)] ?? -1;
    if (hi < 0 || lo < 0) return false;
    bytes[off + i] = (hi << 4) | lo;
  }
  return true;
}

function writeHex(bytes: Uint8Array, off: number, count: number, at: number): void {
  for (let i = 0; i < count; i++) {
    const b = bytes[off + i]!;
    scratch[at + 2 * i] = HEX[b >> 4]!;
    scratch[at + 2 * i + 1] = HEX[b & 15]!;
  }
}

function parseToken(s: string, bytes: Uint8Array, off: number): boolean {
  return s.length === 34 && s.charCodeAt(0) === 84 && s.charCodeAt(1) === 84 && parseHex(s, 2, bytes, off, 16);
}

function tokenAt(bytes: Uint8Array, off: number): string {
  scratch[0] = scratch[1] = 84; // "TT"
  writeHex(bytes, off, 16, 2);
  return scratch.toString('latin1', 0, 34);
}

function parseUuid(s: string, bytes: Uint8Array, off: number): boolean {
  if (s.length !== 36) return false;
  for (const d of DASHES) if (s.charCodeAt(d) !== 45) return false;
  return (
    parseHex(s, 0, bytes, off, 4) &&
    parseHex(s, 9, bytes, off + 4, 2) &&
    parseHex(s, 14, bytes, off + 6, 2) &&
    parseHex(s, 19, bytes, off + 8, 2) &&
    parseHex(s, 24, bytes, off + 10, 6)
  );
}

function uuidAt(bytes: Uint8Array, off: number): string {
  writeHex(bytes, off, 4, 0);
  writeHex(bytes, off + 4, 2, 9);
  writeHex(bytes, off + 6, 2, 14);
  writeHex(bytes, off + 8, 2, 19);
  writeHex(bytes, off + 10, 6, 24);
  for (const d of DASHES) scratch[d] = 45;
  return scratch.toString('latin1', 0, 36);
}

/** hwidHash(): 16 lowercase hex digits, kept as 8 bytes. */
function parseHwidHash(s: string, bytes: Uint8Array, off: number): boolean {
  return s.length === 16 && parseHex(s, 0, bytes, off, 8);
}

function hwidHashAt(bytes: Uint8Array, off: number): string {
  writeHex(bytes, off, 8, 0);
  return scratch.toString('latin1', 0, 16);
}

function verdictCode(v: BeatVerdict | null): number {
  if (v === null) return 0;
  let i = -1;
  if (v.kind === 'accepted' && typeof v.drift === 'boolean') i = v.drift ? 1 : 0;
  else if (v.kind === 'rejected') i = v.reason === 'token' ? 2 : v.reason === 'replay' ? 3 : -1;
  else if (v.kind === 'stop_refused') i = 4;
  // Only the verdict objects the machine makes (no other keys) come back equal.
  return i >= 0 && Object.keys(v).length === Object.keys(VERDICTS[i]!).length ? i + 1 : -1;
}

const isU32 = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff;

/** Strings many sessions share (appIds, code hashes), counted so the last one out frees it. Id 0 is null. */
class Interned {
  private readonly ids = new Map<string, number>();
  private readonly values: (string | undefined)[] = [undefined];
  private readonly refs: number[] = [0];
  private readonly free: number[] = [];

  ref(s: string): number {
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.free.pop() ?? this.values.length;
      this.ids.set(s, id);
      this.values[id] = s;
      this.refs[id] = 0;
    }
    this.refs[id]!++;
    return id;
  }

  unref(id: number): void {
    if (id === 0 || --this.refs[id]! > 0) return;
    this.ids.delete(this.values[id]!);
    this.values[id] = undefined;
    this.free.push(id);
  }

  value(id: number): string {
    return this.values[id]!;
  }

  get size(): number {
    return this.ids.size;
  }

  idOf(s: string): number | undefined {
    return this.ids.get(s);
  }

  clear(): void {
    this.ids.clear();
    this.values.length = 1;
    this.refs.length = 1;
    this.free.length = 0;
  }
}

export class PassiveContexts {
  private readonly slots = new Map<string, number>();
  /** Contexts that do not fit a slot, kept as they are. */
  private readonly irregular = new Map<string, { c: HeartbeatContext; group: number }>();
  private readonly strings = new Interned();
  /** Group -> first slot + 1. */
  private readonly heads = new Map<number, number>();
  private capacity = 0;
  private f64 = new Float64Array(0);
  private u32 = new Uint32Array(0);
  private bytes = new Uint8Array(0);
  private sessionOf: (string | undefined)[] = [];
  private systemIdOf: (string | undefined)[] = [];
  /** First free slot + 1 (0: none; then the arrays grow). */
  private freeHead = 0;

  get size(): number {
    return this.slots.size + this.irregular.size;
  }

  /** Contexts of an unusual shape, kept as objects. */
  get unpacked(): number {
    return this.irregular.size;
  }

  /** Distinct appIds and code hashes held for the packed contexts. */
  get interned(): number {
    return this.strings.size;
  }

  /** Bytes of the typed arrays (the rest is on the V8 heap). */
  get slabBytes(): number {
    return this.f64.byteLength + this.u32.byteLength + this.bytes.byteLength;
  }

  has(session: string): boolean {
    return this.slots.has(session) || this.irregular.has(session);
  }

  get(session: string): HeartbeatContext | undefined {
    const slot = this.slots.get(session);
    if (slot !== undefined) return this.decode(session, slot);
    const odd = this.irregular.get(session);
    return odd ? { ...odd.c } : undefined;
  }

  /** The session's deadline without decoding it. */
  expiresAt(session: string): number | undefined {
    const slot = this.slots.get(session);
    if (slot !== undefined) return this.f64[slot * F + F_EXPIRES];
    return this.irregular.get(session)?.c.expiresAt;
  }

  /** Stores (or replaces) a context; `group` is the list it is threaded into (its shard). */
  put(c: HeartbeatContext, group: number): void {
    this.delete(c.session);
    if (!this.fits(c, group)) {
      this.irregular.set(c.session, { c: { ...c }, group });
      return;
    }
    const slot = this.claim();
    this.u32[slot * U + U_APP] = this.u32[slot * U + U_CODE_HASH] = 0; // write() releases what a slot held
    this.write(slot, c);
    this.u32[slot * U + U_GROUP] = group;
    this.link(slot, group);
    this.sessionOf[slot] = c.session;
    this.slots.set(c.session, slot);
  }

  /** Every field of `c` but its session and group into `slot`; fits() has checked them all. */
  private write(slot: number, c: HeartbeatContext): void {
    const f = slot * F;
    const u = slot * U;
    const b = slot * B;
    // fits() has checked every shape below: nothing can fail half way.
    parseToken(c.token, this.bytes, b + B_TOKEN);
    let flags = verdictCode(c.last) << LAST_SHIFT;
    if (c.userId !== null) {
      parseUuid(c.userId, this.bytes, b + B_USER);
      flags |= HAS_USER;
    }
    if (c.licenseId !== null) {
      parseUuid(c.licenseId, this.bytes, b + B_LICENSE);
      flags |= HAS_LICENSE;
    }
    if (c.codeSize !== null) flags |= HAS_CODE_SIZE;
    if (c.hwidHash !== null) {
      parseHwidHash(c.hwidHash, this.bytes, b + B_HWID);
      flags |= HAS_HWID;
    }
    this.f64[f + F_LAST_INDEX] = c.lastBeatIndex;
    this.f64[f + F_COUNT] = c.beatCount;
    this.f64[f + F_LAST_AT] = c.lastBeatAt;
    this.f64[f + F_STARTED] = c.startedAt;
    this.f64[f + F_EXPIRES] = c.expiresAt;
    this.f64[f + F_CODE_SIZE] = c.codeSize ?? 0;
    this.u32[u + U_APP] = this.intern(this.u32[u + U_APP]!, c.appId);
    this.u32[u + U_CODE_HASH] = this.intern(this.u32[u + U_CODE_HASH]!, c.codeHash);
    this.u32[u + U_INTERVAL] = c.beatInterval;
    this.u32[u + U_WARNINGS] = c.warnings;
    this.u32[u + U_FLAGS] = flags;
    this.systemIdOf[slot] = c.systemId;
  }

  /**
   * Rewrites the slot of a packed session in place, in its group (an accepted beat: no slot released
   * and claimed, no list or map changed); false when the session has no slot or `c` does not fit one.
   */
  update(c: HeartbeatContext): boolean {
    const slot = this.slots.get(c.session);
    if (slot === undefined || !this.fits(c, this.u32[slot * U + U_GROUP]!)) return false;
    this.write(slot, c);
    return true;
  }

  delete(session: string): boolean {
    const slot = this.slots.get(session);
    if (slot === undefined) return this.irregular.delete(session);
    this.slots.delete(session);
    this.release(slot);
    return true;
  }

  /** Removes every context whose deadline is at or before `now`, handing each to `onExpired`. */
  sweep(now: number, onExpired: (c: HeartbeatContext) => void): number {
    const gone: HeartbeatContext[] = [];
    for (let slot = 0; slot < this.capacity; slot++) {
      const session = this.sessionOf[slot];
      if (session !== undefined && this.f64[slot * F + F_EXPIRES]! <= now) {
        gone.push(this.decode(session, slot));
        this.slots.delete(session);
        this.release(slot);
      }
    }
    for (const [session, odd] of this.irregular) {
      if (odd.c.expiresAt <= now) {
        gone.push(odd.c);
        this.irregular.delete(session);
      }
    }
    this.shrink();
    for (const c of gone) onExpired(c);
    return gone.length;
  }

  /** Removes every context of a group; returns their sessions. */
  removeGroup(group: number): string[] {
    const gone: string[] = [];
    for (let next = this.heads.get(group) ?? 0; next !== 0;) {
      const slot = next - 1;
      next = this.u32[slot * U + U_NEXT]!;
      const session = this.sessionOf[slot]!;
      gone.push(session);
      this.slots.delete(session);
      this.release(slot);
    }
    for (const [session, odd] of this.irregular) {
      if (odd.group === group) {
        gone.push(session);
        this.irregular.delete(session);
      }
    }
    this.shrink();
    return gone;
  }

  /** Sessions whose `key` is `value`, without decoding any. */
  sessionsWhere(key: ContextKey, value: string): string[] {
    const out: string[] = [];
    this.scan(key, value, (session) => out.push(session));
    return out;
  }

  countWhere(key: ContextKey, value: string): number {
    let n = 0;
    this.scan(key, value, () => n++);
    return n;
  }

  *contexts(): IterableIterator<HeartbeatContext> {
    for (const [session, slot] of this.slots) yield this.decode(session, slot);
    for (const odd of this.irregular.values()) yield { ...odd.c };
  }

  clear(): void {
    this.slots.clear();
    this.irregular.clear();
    this.strings.clear();
    this.heads.clear();
    this.capacity = 0;
    this.f64 = new Float64Array(0);
    this.u32 = new Uint32Array(0);
    this.bytes = new Uint8Array(0);
    this.sessionOf = [];
    this.systemIdOf = [];
    this.freeHead = 0;
  }

  // ---- slots --------------------------------------------------------------------------------------

  private fits(c: HeartbeatContext, group: number): boolean {
    return (
      c.v === HEARTBEAT_SNAPSHOT_VERSION &&
      typeof c.appId === 'string' &&
      typeof c.systemId === 'string' &&
      parseToken(c.token, scratch, 0) &&
      (c.userId === null || parseUuid(c.userId, scratch, 0)) &&
      (c.licenseId === null || parseUuid(c.licenseId, scratch, 0)) &&
      (c.hwidHash === null || (typeof c.hwidHash === 'string' && parseHwidHash(c.hwidHash, scratch, 0))) &&
      (c.codeHash === null || typeof c.codeHash === 'string') &&
      (c.codeSize === null || typeof c.codeSize === 'number') &&
      typeof c.lastBeatIndex === 'number' &&
      typeof c.beatCount === 'number' &&
      typeof c.lastBeatAt === 'number' &&
      typeof c.startedAt === 'number' &&
      typeof c.expiresAt === 'number' &&
      isU32(c.beatInterval) &&
      isU32(c.warnings) &&
      isU32(group) &&
      verdictCode(c.last) >= 0
    );
  }

  private decode(session: string, slot: number): HeartbeatContext {
    const f = slot * F;
    const u = slot * U;
    const b = slot * B;
    const flags = this.u32[u + U_FLAGS]!;
    const hash = this.u32[u + U_CODE_HASH]!;
    const last = flags >> LAST_SHIFT;
    return {
      v: HEARTBEAT_SNAPSHOT_VERSION,
      appId: this.strings.value(this.u32[u + U_APP]!),
      session,
      token: tokenAt(this.bytes, b + B_TOKEN),
      systemId: this.systemIdOf[slot]!,
      beatInterval: this.u32[u + U_INTERVAL]!,
      lastBeatIndex: this.f64[f + F_LAST_INDEX]!,
      beatCount: this.f64[f + F_COUNT]!,
      warnings: this.u32[u + U_WARNINGS]!,
      lastBeatAt: this.f64[f + F_LAST_AT]!,
      startedAt: this.f64[f + F_STARTED]!,
      expiresAt: this.f64[f + F_EXPIRES]!,
      codeHash: hash === 0 ? null : this.strings.value(hash),
      codeSize: flags & HAS_CODE_SIZE ? this.f64[f + F_CODE_SIZE]! : null,
      userId: flags & HAS_USER ? uuidAt(this.bytes, b + B_USER) : null,
      licenseId: flags & HAS_LICENSE ? uuidAt(this.bytes, b + B_LICENSE) : null,
      hwidHash: flags & HAS_HWID ? hwidHashAt(this.bytes, b + B_HWID) : null,
      last: last === 0 ? null : { ...VERDICTS[last - 1]! },
    };
  }

  /** The interned id of `s` for a slot that held `held` (0: none): unchanged, or the new one counted first. */
  private intern(held: number, s: string | null): number {
    if (held !== 0 && this.strings.value(held) === s) return held;
    const id = s === null ? 0 : this.strings.ref(s);
    this.strings.unref(held);
    return id;
  }

  private scan(key: ContextKey, value: string, found: (session: string) => void): void {
    // A slot holds its appId as an interned id and its user and license ids as 16 bytes: those are compared.
    const app = key === 'appId' ? (this.strings.idOf(value) ?? 0) : 0;
    const byId = key !== 'appId' && parseUuid(value, scratch, 0);
    const at = key === 'userId' ? B_USER : B_LICENSE;
    const has = key === 'userId' ? HAS_USER : HAS_LICENSE;
    for (let slot = 0; (app !== 0 || byId) && slot < this.capacity; slot++) {
      const session = this.sessionOf[slot];
      if (session === undefined) continue;
      if (app !== 0) {
        if (this.u32[slot * U + U_APP] === app) found(session);
        continue;
      }
      if (!(this.u32[slot * U + U_FLAGS]! & has)) continue;
      const b = slot * B + at;
      let same = true;
      for (let i = 0; i < 16 && same; i++) same = this.bytes[b + i] === scratch[i];
      if (same) found(session);
    }
    for (const [session, odd] of this.irregular) if (odd.c[key] === value) found(session);
  }

  private claim(): number {
    if (this.freeHead === 0) this.grow();
    const slot = this.freeHead - 1;
    this.freeHead = this.u32[slot * U + U_NEXT]!;
    return slot;
  }

  private release(slot: number): void {
    const u = slot * U;
    this.unlink(slot);
    this.strings.unref(this.u32[u + U_APP]!);
    this.strings.unref(this.u32[u + U_CODE_HASH]!);
    this.sessionOf[slot] = undefined;
    this.systemIdOf[slot] = undefined;
    this.u32[u + U_NEXT] = this.freeHead;
    this.freeHead = slot + 1;
  }

  private link(slot: number, group: number): void {
    const head = this.heads.get(group) ?? 0;
    this.u32[slot * U + U_PREV] = 0;
    this.u32[slot * U + U_NEXT] = head;
    if (head !== 0) this.u32[(head - 1) * U + U_PREV] = slot + 1;
    this.heads.set(group, slot + 1);
  }

  private unlink(slot: number): void {
    const u = slot * U;
    const prev = this.u32[u + U_PREV]!;
    const next = this.u32[u + U_NEXT]!;
    if (prev !== 0) this.u32[(prev - 1) * U + U_NEXT] = next;
    else if (next !== 0) this.heads.set(this.u32[u + U_GROUP]!, next);
    else this.heads.delete(this.u32[u + U_GROUP]!);
    if (next !== 0) this.u32[(next - 1) * U + U_PREV] = prev;
  }

  /** Twice the slots (called when none is free: every slot keeps its number and its list). */
  private grow(): void {
    const from = this.capacity;
    const to = Math.max(MIN_SLOTS, from * 2);
    const [f64, u32, bytes] = [this.f64, this.u32, this.bytes];
    this.f64 = new Float64Array(to * F);
    this.u32 = new Uint32Array(to * U);
    this.bytes = new Uint8Array(to * B);
    this.f64.set(f64);
    this.u32.set(u32);
    this.bytes.set(bytes);
    for (let slot = from; slot < to; slot++) {
      this.sessionOf.push(undefined);
      this.systemIdOf.push(undefined);
    }
    this.capacity = to;
    this.freeFrom(from);
  }

  /** Gives memory back once at most a quarter of the slots are used: the used ones move to the front. */
  private shrink(): void {
    if (this.capacity <= MIN_SLOTS || this.slots.size * 4 > this.capacity) return;
    let to = MIN_SLOTS;
    while (to < this.slots.size * 2) to *= 2;
    const [f64, u32, bytes, sessionOf, systemIdOf] = [this.f64, this.u32, this.bytes, this.sessionOf, this.systemIdOf];
    this.f64 = new Float64Array(to * F);
    this.u32 = new Uint32Array(to * U);
    this.bytes = new Uint8Array(to * B);
    this.sessionOf = new Array<string | undefined>(to).fill(undefined);
    this.systemIdOf = new Array<string | undefined>(to).fill(undefined);
    this.heads.clear();
    let used = 0;
    for (const [session, slot] of this.slots) {
      const n = used++;
      for (let i = 0; i < F; i++) this.f64[n * F + i] = f64[slot * F + i]!;
      for (let i = 0; i < U; i++) this.u32[n * U + i] = u32[slot * U + i]!;
      for (let i = 0; i < B; i++) this.bytes[n * B + i] = bytes[slot * B + i]!;
      this.sessionOf[n] = sessionOf[slot];
      this.systemIdOf[n] = systemIdOf[slot];
      this.link(n, this.u32[n * U + U_GROUP]!);
      this.slots.set(session, n); // an existing key: the iteration is not disturbed
    }
    this.capacity = to;
    this.freeFrom(used);
  }

  /** Threads slots [from, capacity) into the free list, lowest first. */
  private freeFrom(from: number): void {
    this.freeHead = 0;
    for (let slot = this.capacity - 1; slot >= from; slot--) {
      this.u32[slot * U + U_NEXT] = this.freeHead;
      this.freeHead = slot + 1;
    }
  }
}
