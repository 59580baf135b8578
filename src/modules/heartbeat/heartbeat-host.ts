// Hosts the heartbeat sessions of this worker. A session is the context of an alive
// heartbeatMachine (the other states are final, and a session that reaches one is removed), so
// the host keeps contexts, not running actors: recently started ones as objects (at most `maxLive`),
// the rest packed in heartbeat-passive.ts (about 250 bytes). An accepted beat, the steady load, is
// the machine's accepted branch applied directly (acceptedBeat), to a packed session in its slot;
// every other event runs the machine itself on an actor restored from the context for that one
// event (and leaves the session unpacked). A sweeper evicts sessions past
// their deadline. Sessions are grouped (by shard) so a group can be dropped at once.
import { createActor } from 'xstate';
import {
  acceptedBeat,
  heartbeatMachine,
  type HeartbeatContext,
  type HeartbeatEvent,
  type HeartbeatInput,
  type BeatVerdict,
} from './heartbeat.machine.js';
import { PassiveContexts, type ContextKey } from './heartbeat-passive.js';

interface HeartbeatHostOptions {
  now: () => number;
  maxLive?: number;
  /** The group a session belongs to (its shard); removeGroup() drops one. */
  groupOf?: (session: string) => number;
  /** Called for each session evicted by the sweeper. */
  onExpired?: (c: HeartbeatContext) => void;
}

interface EventResult {
  verdict: BeatVerdict;
  /** The session after the event; null when it ended (killed or closed). */
  context: HeartbeatContext | null;
  /** The session as it was before the event (for proofs keyed by the previous token). */
  before: HeartbeatContext;
}

export class HeartbeatHost {
  /** Unpacked contexts; insertion order is recency order: the first entry is the least recently used. */
  private readonly live = new Map<string, HeartbeatContext>();
  private readonly passive = new PassiveContexts();
  private readonly maxLive: number;
  private readonly groupOf: (session: string) => number;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly opts: HeartbeatHostOptions) {
    this.maxLive = opts.maxLive ?? 10_000;
    this.groupOf = opts.groupOf ?? (() => 0);
  }

  startSweeper(everyMs = 1_000): void {
    this.sweeper = setInterval(() => this.sweep(), everyMs);
    this.sweeper.unref();
  }

  get size(): number {
    return this.live.size + this.passive.size;
  }

  /** Sessions kept unpacked (the recently active ones). */
  get unpacked(): number {
    return this.live.size;
  }

  has(session: string): boolean {
    return this.live.has(session) || this.passive.has(session);
  }

  /** The session's current context without waking it. */
  peek(session: string): HeartbeatContext | undefined {
    return this.live.get(session) ?? this.passive.get(session);
  }

  /** The session's deadline (cheaper than peek for a packed one); undefined when there is none. */
  deadline(session: string): number | undefined {
    return this.live.get(session)?.expiresAt ?? this.passive.expiresAt(session);
  }

  create(input: HeartbeatInput): HeartbeatContext {
    this.passive.delete(input.session);
    const actor = createActor(heartbeatMachine, { input });
    actor.start();
    const c = actor.getSnapshot().context;
    actor.stop();
    this.touch(input.session, c);
    return c;
  }

  /** Restores a session from a context persisted elsewhere (failover, handover). */
  restore(c: HeartbeatContext): void {
    this.live.delete(c.session);
    this.passive.put(c, this.groupOf(c.session));
  }

  /** Delivers one event to the session; undefined when there is no such session. */
  send(session: string, event: HeartbeatEvent): EventResult | undefined {
    const unpacked = this.live.get(session);
    const before = unpacked ?? this.passive.get(session);
    if (!before) return undefined;
    const accepted = event.type === 'BEAT' ? acceptedBeat(before, event.beat) : undefined;
    if (accepted) {
      // A packed session stays packed, rewritten in place: a fleet's beats (each session once in
      // 30-300 s) would otherwise unpack one session and pack another every time.
      if (unpacked) this.touch(session, accepted);
      else if (!this.passive.update(accepted)) this.passive.put(accepted, this.groupOf(session));
      return { verdict: accepted.last!, context: accepted, before };
    }
    if (!unpacked) this.passive.delete(session);
    // A restored snapshot ignores input; the typing still asks for one.
    const actor = createActor(heartbeatMachine, {
      snapshot: heartbeatMachine.resolveState({ value: 'alive', context: before }),
      input: undefined as unknown as HeartbeatInput,
    });
    actor.start();
    actor.send(event);
    const snap = actor.getSnapshot();
    actor.stop();
    if (snap.status === 'done') {
      this.remove(session);
      return { verdict: snap.context.last!, context: null, before };
    }
    this.touch(session, snap.context);
    return { verdict: snap.context.last!, context: snap.context, before };
  }

  remove(session: string): void {
    this.live.delete(session);
    this.passive.delete(session);
  }

  /** Evicts every session whose deadline passed; returns how many. */
  sweep(): number {
    const now = this.opts.now();
    let n = 0;
    for (const [id, c] of this.live) {
      if (c.expiresAt <= now) {
        this.remove(id);
        this.opts.onExpired?.(c);
        n++;
      }
    }
    n += this.passive.sweep(now, (c) => this.opts.onExpired?.(c));
    return n;
  }

  /** Removes every session of a group (a released shard); returns how many. */
  removeGroup(group: number): number {
    let n = 0;
    for (const id of [...this.live.keys()]) {
      if (this.groupOf(id) === group) {
        this.remove(id);
        n++;
      }
    }
    return n + this.passive.removeGroup(group).length;
  }

  /** Sessions whose appId, userId or licenseId is `value` (revocations), without waking any. */
  sessionsWhere(key: ContextKey, value: string): string[] {
    const out = this.passive.sessionsWhere(key, value);
    for (const [id, c] of this.live) if (c[key] === value) out.push(id);
    return out;
  }

  countWhere(key: ContextKey, value: string): number {
    let n = this.passive.countWhere(key, value);
    for (const c of this.live.values()) if (c[key] === value) n++;
    return n;
  }

  /** Every session's context (tests; each packed one is decoded). */
  contexts(): HeartbeatContext[] {
    return [...this.live.values(), ...this.passive.contexts()];
  }

  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.live.clear();
    this.passive.clear();
  }

  /** Marks the session most recently used and packs the least recently used past the cap. */
  private touch(session: string, c: HeartbeatContext): void {
    this.live.delete(session);
    this.live.set(session, c);
    while (this.live.size > this.maxLive) {
      const [oldest, old] = this.live.entries().next().value as [string, HeartbeatContext];
      this.live.delete(oldest);
      this.passive.put(old, this.groupOf(oldest));
    }
  }
}
