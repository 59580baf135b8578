// Hosts license-key actors in this worker: one actor per key id, created on demand, fed one
// operation at a time from a per-key queue, passivated when idle, capped in number.
import { createActor, fromPromise, waitFor, type Actor } from 'xstate';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import {
  isResting,
  licenseMachine,
  type Decision,
  type DecideInput,
  type FinaliseOutput,
  type LicenseOp,
  type WriteInput,
} from './license.machine.js';

/** The steps of license operations: the policy's decision and the conditional writes (see license.machine.ts). */
export interface LicenseEffects {
  decide(input: DecideInput): Promise<Decision>;
  claim(input: WriteInput): Promise<boolean>;
  /** Test-only fault injection point between claim and finalise (FAULT_AFTER_CLAIM_MS). */
  afterClaim(input: WriteInput): Promise<void>;
  finalise(input: WriteInput): Promise<FinaliseOutput>;
  release(input: WriteInput): Promise<void>;
  activateUnused(input: WriteInput): Promise<boolean>;
  touchUsed(input: WriteInput): Promise<boolean>;
}

interface Entry {
  actor: Actor<typeof licenseMachine>;
  /** The queue: each operation starts when the previous one settled. */
  tail: Promise<unknown>;
  queued: number;
  lastUsed: number;
}

interface LicenseHostOptions {
  log: Logger;
  now: () => number;
  /** Idle actors older than this are stopped by the sweeper. */
  idleMs?: number;
  /** Upper bound of live actors; the least recently used idle ones are stopped past it. */
  maxActors?: number;
}

export class LicenseHost {
  private readonly entries = new Map<string, Entry>();
  private readonly machine;
  private seq = 0;
  private readonly sweeper: NodeJS.Timeout;
  private readonly idleMs: number;
  private readonly maxActors: number;
  /**
   * The error an effect threw, per key, for the operation under way: the machine records only that
   * a step failed, and the caller must see the cause (a database outage is a 503, not a 500).
   */
  private readonly failures = new Map<string, unknown>();

  constructor(
    effects: LicenseEffects,
    private readonly opts: LicenseHostOptions,
  ) {
    this.idleMs = opts.idleMs ?? 30_000;
    this.maxActors = opts.maxActors ?? 10_000;
    const step = <I extends { licenseId: string; op: LicenseOp }, O>(name: string, fn: (input: I) => Promise<O>) =>
      fromPromise<O, I>(async ({ input }) => {
        try {
          return await fn(input);
        } catch (err) {
          opts.log.error({ err, licenseId: input.licenseId, op: input.op.kind, step: name }, 'license.effect_failed');
          this.failures.set(input.licenseId, err);
          throw err;
        }
      });
    this.machine = licenseMachine.provide({
      actors: {
        decide: step('decide', (i: DecideInput) => effects.decide(i)),
        claim: step('claim', (i: WriteInput) => effects.claim(i)),
        afterClaim: step('afterClaim', (i: WriteInput) => effects.afterClaim(i)),
        finalise: step('finalise', (i: WriteInput) => effects.finalise(i)),
        release: step('release', (i: WriteInput) => effects.release(i)),
        activateUnused: step('activateUnused', (i: WriteInput) => effects.activateUnused(i)),
        touchUsed: step('touchUsed', (i: WriteInput) => effects.touchUsed(i)),
      },
    });
    this.sweeper = setInterval(() => this.passivate(this.idleMs), Math.min(this.idleMs, 10_000));
    this.sweeper.unref();
  }

  get size(): number {
    return this.entries.size;
  }

  /** Runs `op` on the key's actor after every operation queued before it; throws the outcome's AppError. */
  async run(licenseId: string, op: LicenseOp): Promise<Record<string, unknown>> {
    let entry = this.entries.get(licenseId);
    if (!entry) {
      if (this.entries.size >= this.maxActors) this.passivate(0);
      const actor = createActor(this.machine, { input: { licenseId } });
      actor.start();
      entry = { actor, tail: Promise.resolve(), queued: 0, lastUsed: this.opts.now() };
      this.entries.set(licenseId, entry);
    }
    const e = entry;
    const opId = ++this.seq;
    e.queued++;
    const result = e.tail.then(async () => {
      e.actor.send({ type: 'OPERATE', opId, op });
      const snap = await waitFor(e.actor, (s) => isResting(s) && s.context.lastOutcome?.opId === opId);
      return snap.context.lastOutcome!;
    });
    e.tail = result.catch(() => undefined);
    try {
      const outcome = await result;
      const cause = this.failures.get(licenseId);
      this.failures.delete(licenseId);
      if (!outcome.ok)
        throw outcome.code === 'internal'
          ? (cause ?? new Error(`license operation ${op.kind} failed`))
          : new AppError(outcome.code);
      return outcome.value;
    } finally {
      e.queued--;
      e.lastUsed = this.opts.now();
    }
  }

  /** Stops actors with nothing queued that have been idle at least `minIdleMs`. */
  passivate(minIdleMs: number): number {
    const cutoff = this.opts.now() - minIdleMs;
    let stopped = 0;
    for (const [id, e] of this.entries) {
      if (e.queued === 0 && e.lastUsed <= cutoff) {
        e.actor.stop();
        this.entries.delete(id);
        stopped++;
      }
    }
    return stopped;
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const e of this.entries.values()) e.actor.stop();
    this.entries.clear();
  }
}
