// Hosts heartbeat-session actors of this worker. Recently active sessions are live XState
// actors (at most `maxLive`); the rest are passivated to their context alone, packed in
// heartbeat-passive.ts (about 250 bytes), and rehydrated on their next event. A sweeper evicts
// sessions past their deadline. Sessions are grouped (by shard) so a group can be dropped at once.
import { createActor, type Actor } from 'xstate';
import {
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
  /** Insertion order is recency order: the first entry is the least recently used. */
  private readonly live = new Map<string, Actor<typeof heartbeatMachine>>();
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

  get liveActors(): number {
    return this.live.size;
  }

  has(session: string): boolean {
    return this.live.has(session) || this.passive.has(session);
  }

  /** The session's current context without waking it. */
  peek(session: string): HeartbeatContext | undefined {
    return this.live.get(session)?.getSnapshot().context ?? this.passive.get(session);
  }

  /** The session's deadline (cheaper than peek for a passivated one); undefined when there is none. */
  deadline(session: string): number | undefined {
    return this.live.get(session)?.getSnapshot().context.expiresAt ?? this.passive.expiresAt(session);
  }

  create(input: HeartbeatInput): HeartbeatContext {
    this.passive.delete(input.session);
    const actor = createActor(heartbeatMachine, { input });
    actor.start();
    this.touch(input.session, actor);
    return actor.getSnapshot().context;
  }

  /** Restores a session from a context persisted elsewhere (failover, handover). */
  restore(c: HeartbeatContext): void {
    this.live.get(c.session)?.stop();
    this.live.delete(c.session);
    this.passive.put(c, this.groupOf(c.session));
  }

  /** Delivers one event to the session's actor; undefined when there is no such session. */
  send(session: string, event: HeartbeatEvent): EventResult | undefined {
    const actor = this.wake(session);
    if (!actor) return undefined;
    const before = actor.getSnapshot().context;
    actor.send(event);
    const snap = actor.getSnapshot();
    if (snap.status === 'done') {
      this.remove(session);
      return { verdict: snap.context.last!, context: null, before };
    }
    this.touch(session, actor);
    return { verdict: snap.context.last!, context: snap.context, before };
  }

  remove(session: string): void {
    this.live.get(session)?.stop();
    this.live.delete(session);
    this.passive.delete(session);
  }

  /** Evicts every session whose deadline passed; returns how many. */
  sweep(): number {
    const now = this.opts.now();
    let n = 0;
    for (const [id, actor] of this.live) {
      const c = actor.getSnapshot().context;
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
    for (const [id, a] of this.live) if (a.getSnapshot().context[key] === value) out.push(id);
    return out;
  }

  countWhere(key: ContextKey, value: string): number {
    let n = this.passive.countWhere(key, value);
    for (const a of this.live.values()) if (a.getSnapshot().context[key] === value) n++;
    return n;
  }

  /** Every session's context (tests; each passivated one is decoded). */
  contexts(): HeartbeatContext[] {
    return [...[...this.live.values()].map((a) => a.getSnapshot().context), ...this.passive.contexts()];
  }

  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    for (const a of this.live.values()) a.stop();
    this.live.clear();
    this.passive.clear();
  }

  private wake(session: string): Actor<typeof heartbeatMachine> | undefined {
    const live = this.live.get(session);
    if (live) return live;
    const c = this.passive.take(session);
    if (!c) return undefined;
    // A restored snapshot ignores input; the typing still asks for one.
    const actor = createActor(heartbeatMachine, {
      snapshot: heartbeatMachine.resolveState({ value: 'alive', context: c }),
      input: undefined as unknown as HeartbeatInput,
    });
    actor.start();
    return actor;
  }

  /** Marks the actor most recently used and passivates the least recently used past the cap. */
  private touch(session: string, actor: Actor<typeof heartbeatMachine>): void {
    this.live.delete(session);
    this.live.set(session, actor);
    while (this.live.size > this.maxLive) {
      const [oldest, a] = this.live.entries().next().value as [string, Actor<typeof heartbeatMachine>];
      this.live.delete(oldest);
      this.passive.put(a.getSnapshot().context, this.groupOf(oldest));
      a.stop();
    }
  }
}
