// Hosts license-key actors in this worker: one actor per key id, created on demand, fed one
// operation at a time from a per-key queue, passivated when idle, capped in number.
// An `activate` operation (every `license` call: the hot one) runs the machine's activate branch
// as a plain function, activateLane below, on the same queue and with the same effects, and
// never makes an actor: the machine keeps the model (a property test drives both with the same
// scripted effects and compares every step); register operations run on the actor.
import { createActor, fromPromise, waitFor, type Actor } from 'xstate';
import type { Logger } from 'pino';
import { AppError, type ErrorCode } from '../../errors.js';
import {
  isResting,
  LICENSE_MAX_ATTEMPTS,
  licenseMachine,
  type ActivateOp,
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

type LaneOutcome =
  { ok: true; value: Record<string, unknown> } | { ok: false; code: ErrorCode | 'internal'; cause?: unknown };

/**
 * The machine's activate branch, step for step: deciding -> decided -> activatingUnused or
 * touchingUsed -> settled, deciding again after a conditional write that missed (at most
 * LICENSE_MAX_ATTEMPTS decisions); a step that throws is `internal` (with its cause). An activate
 * operation starts from rest, where the context holds no claim, so writes see `claimedFrom` null
 * and `stamp` 0, as the machine's writeInput gives them.
 */
export async function activateLane(
  effects: Pick<LicenseEffects, 'decide' | 'activateUnused' | 'touchUsed'>,
  licenseId: string,
  op: ActivateOp,
  failed: (step: string, err: unknown) => void = () => undefined,
): Promise<LaneOutcome> {
  for (let attempts = 1; ; attempts++) {
    let decision: Decision;
    try {
      decision = await effects.decide({ licenseId, op });
    } catch (err) {
      failed('decide', err);
      return { ok: false, code: 'internal', cause: err };
    }
    if (decision.kind === 'refuse') return { ok: false, code: decision.code };
    // The policy never answers an activation with a claim; the machine would start one.
    if (decision.kind === 'claim') throw new Error('license policy answered an activation with a claim');
    const step = decision.kind === 'activate_unused' ? 'activateUnused' : 'touchUsed';
    let wrote: boolean;
    try {
      wrote = await effects[step]({ licenseId, op, stamp: 0, decision, claimedFrom: null });
    } catch (err) {
      failed(step, err);
      return { ok: false, code: 'internal', cause: err };
    }
    if (wrote) return { ok: true, value: decision.value };
    if (attempts >= LICENSE_MAX_ATTEMPTS) return { ok: false, code: 'license_in_progress' };
  }
}

interface Entry {
  /** Made for the first register operation; activations need none. */
  actor: Actor<typeof licenseMachine> | undefined;
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
    private readonly effects: LicenseEffects,
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

  /** Runs `op` on the key after every operation queued before it; throws the outcome's AppError. */
  async run(licenseId: string, op: LicenseOp): Promise<Record<string, unknown>> {
    let entry = this.entries.get(licenseId);
    if (!entry) {
      if (this.entries.size >= this.maxActors) this.passivate(0);
      entry = { actor: undefined, tail: Promise.resolve(), queued: 0, lastUsed: this.opts.now() };
      this.entries.set(licenseId, entry);
    }
    const e = entry;
    e.queued++;
    const result = e.tail.then(() =>
      op.kind === 'activate' ? this.activate(licenseId, op) : this.operate(e, licenseId, op),
    );
    e.tail = result.catch(() => undefined);
    try {
      return await result;
    } finally {
      e.queued--;
      e.lastUsed = this.opts.now();
    }
  }

  private async activate(licenseId: string, op: ActivateOp): Promise<Record<string, unknown>> {
    const outcome = await activateLane(this.effects, licenseId, op, (step, err) =>
      this.opts.log.error({ err, licenseId, op: op.kind, step }, 'license.effect_failed'),
    );
    if (outcome.ok) return outcome.value;
    throw outcome.code === 'internal'
      ? (outcome.cause ?? new Error(`license operation ${op.kind} failed`))
      : new AppError(outcome.code);
  }

  private async operate(e: Entry, licenseId: string, op: LicenseOp): Promise<Record<string, unknown>> {
    if (!e.actor) {
      e.actor = createActor(this.machine, { input: { licenseId } });
      e.actor.start();
    }
    const actor = e.actor;
    const opId = ++this.seq;
    actor.send({ type: 'OPERATE', opId, op });
    const snap = await waitFor(actor, (s) => isResting(s) && s.context.lastOutcome?.opId === opId);
    const outcome = snap.context.lastOutcome!;
    const cause = this.failures.get(licenseId);
    this.failures.delete(licenseId);
    if (!outcome.ok)
      throw outcome.code === 'internal'
        ? (cause ?? new Error(`license operation ${op.kind} failed`))
        : new AppError(outcome.code);
    return outcome.value;
  }

  /** Stops actors with nothing queued that have been idle at least `minIdleMs`. */
  passivate(minIdleMs: number): number {
    const cutoff = this.opts.now() - minIdleMs;
    let stopped = 0;
    for (const [id, e] of this.entries) {
      if (e.queued === 0 && e.lastUsed <= cutoff) {
        e.actor?.stop();
        this.entries.delete(id);
        stopped++;
      }
    }
    return stopped;
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const e of this.entries.values()) e.actor?.stop();
    this.entries.clear();
  }
}
