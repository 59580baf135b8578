// Hosts heartbeat-session actors of this worker. Recently active sessions are live XState
// actors (at most `maxLive`); the rest are passivated to their context alone (a few hundred
// bytes) and rehydrated on their next event. A sweeper evicts sessions past their deadline.
import { createActor, type Actor } from 'xstate';
import {
  heartbeatMachine,
  type HeartbeatContext,
  type HeartbeatEvent,
  type HeartbeatInput,
  type BeatVerdict,
} from './heartbeat.machine.js';

export interface HeartbeatHostOptions {
  now: () => number;
  maxLive?: number;
  /** Called for each session evicted by the sweeper. */
  onExpired?: (c: HeartbeatContext) => void;
}

export interface EventResult {
  verdict: BeatVerdict;
  /** The session after the event; null when it ended (killed or closed). */
  context: HeartbeatContext | null;
  /** The session as it was before the event (for proofs keyed by the previous token). */
  before: HeartbeatContext;
}

export class HeartbeatHost {
  /** Insertion order is recency order: the first entry is the least recently used. */
  private readonly live = new Map<string, Actor<typeof heartbeatMachine>>();
  private readonly passive = new Map<string, HeartbeatContext>();
  private readonly maxLive: number;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly opts: HeartbeatHostOptions) {
    this.maxLive = opts.maxLive ?? 10_000;
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

  create(input: HeartbeatInput): HeartbeatContext {
    const actor = createActor(heartbeatMachine, { input });
    actor.start();
    this.touch(input.session, actor);
    return actor.getSnapshot().context;
  }

  /** Restores a session from a context persisted elsewhere (failover, handover). */
  restore(c: HeartbeatContext): void {
    this.live.get(c.session)?.stop();
    this.live.delete(c.session);
    this.passive.set(c.session, c);
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
    for (const [id, c] of this.passive) {
      if (c.expiresAt <= now) {
        this.passive.delete(id);
        this.opts.onExpired?.(c);
        n++;
      }
    }
    return n;
  }

  /** Every session's context (handover and tests). */
  contexts(): HeartbeatContext[] {
    return [...[...this.live.values()].map((a) => a.getSnapshot().context), ...this.passive.values()];
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
    const c = this.passive.get(session);
    if (!c) return undefined;
    this.passive.delete(session);
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
      this.passive.set(oldest, a.getSnapshot().context);
      a.stop();
    }
  }
}
