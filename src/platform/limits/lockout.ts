// Failed-attempt lockouts (docs/protocol.md 2, 7, 11.4, 11.31) on rate-limiter-flexible, shared by all
// workers through the coordinator. The Nth failure still answers normally; from then on the key is
// blocked for `lockSeconds` and every attempt, even a correct one, answers 429.
//
// One admission path for every attempt limit: an attempt is *reserved* (one point taken, atomically,
// in this process or in Redis) before its credentials are checked, and refused when that point is
// past the limit. Reserved points count attempts in flight as if they had failed, so a burst of
// parallel guesses cannot all be checked before the counter moves: at most `failures` of them are.
// An attempt that ends without a counted failure gives its point back; a failed one keeps it.
import type { RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import type { Coordinator } from '../cluster/coordinator.js';
import { LIMITERS } from '../cluster/names.js';
import { lockedOut } from '../../errors.js';

interface LockoutPolicy {
  name: string;
  failures: number;
  windowSeconds: number;
  lockSeconds: number;
}

interface Held {
  lock: Lockout;
  key: string;
}

/** A reserved attempt: mark it failed (or not), then settle it exactly once. */
export class Attempt {
  private failed = false;

  constructor(private readonly held: Held[]) {}

  /** The attempt failed in a way that counts (a wrong password or code): its points are kept at settle(). */
  fail(): void {
    this.failed = true;
  }

  /** Keeps the points of a failure (locking each key that reached its limit) or gives them back. */
  async settle(): Promise<void> {
    const held = this.held.splice(0);
    await Promise.all(held.map((h) => (this.failed ? h.lock.lockIfReached(h.key) : h.lock.refund(h.key))));
  }
}

/**
 * Reserves one attempt against each key of each lockout; throws 429 (giving every point back) when
 * any key is past its limit. The caller settles the attempt whatever happens (see `attempt`).
 */
export async function reserve(parts: readonly (readonly [Lockout, readonly string[]])[]): Promise<Attempt> {
  const held: Held[] = [];
  let wait = 0;
  const results = await Promise.allSettled(
    parts.flatMap(([lock, keys]) =>
      keys.map(async (key) => {
        const over = await lock.take(key);
        held.push({ lock, key });
        wait = Math.max(wait, over);
      }),
    ),
  );
  const failed = results.find((r) => r.status === 'rejected');
  if (failed || wait > 0) {
    await Promise.allSettled(held.map((h) => h.lock.refund(h.key)));
    if (failed) throw (failed as PromiseRejectedResult).reason;
    throw lockedOut(wait / 1000);
  }
  return new Attempt(held);
}

/** Runs `fn` as one reserved attempt (see reserve); the attempt is settled however `fn` ends. */
export async function attempt<T>(
  parts: readonly (readonly [Lockout, readonly string[]])[],
  fn: (a: Attempt) => Promise<T>,
): Promise<T> {
  const a = await reserve(parts);
  try {
    return await fn(a);
  } finally {
    await a.settle();
  }
}

export class Lockout {
  private readonly limiter: RateLimiterAbstract;

  constructor(
    coordinator: Coordinator,
    private readonly policy: LockoutPolicy,
  ) {
    this.limiter = coordinator.limiter({
      keyPrefix: LIMITERS.lockout(policy.name),
      points: policy.failures,
      duration: policy.windowSeconds,
    });
  }

  /** Runs `fn` as one reserved attempt against `keys` of this lockout alone. */
  attempt<T>(keys: readonly string[], fn: (a: Attempt) => Promise<T>): Promise<T> {
    return attempt([[this, keys]], fn);
  }

  /** Takes one point; returns 0 when the attempt may be checked, else how long (ms) the key stays locked. */
  async take(key: string): Promise<number> {
    const r: RateLimiterRes = await this.limiter.penalty(key, 1);
    return r.consumedPoints > this.policy.failures ? Math.max(1, r.msBeforeNext) : 0;
  }

  /** Gives back the point of an attempt that did not fail (or was never checked). */
  async refund(key: string): Promise<void> {
    await this.limiter.reward(key, 1);
  }

  /** After a failure: a key whose points reached the limit is locked for lockSeconds from now. */
  async lockIfReached(key: string): Promise<void> {
    const r = await this.limiter.get(key);
    if (r && r.consumedPoints >= this.policy.failures) await this.limiter.block(key, this.policy.lockSeconds);
  }
}

/** consumeOrThrow without waiting, for a limiter that counts in this process (consumeNow). */
export function consumeNowOrThrow(
  limiter: { consumeNow(key: string, points?: number): RateLimiterRes },
  key: string,
  onLimited: (retryAfterSeconds: number) => Error,
): void {
  try {
    limiter.consumeNow(key, 1);
  } catch (res) {
    throw refusal(res, onLimited);
  }
}

/** What a limiter's refusal becomes: its own error, or `onLimited` with the wait it announced. */
function refusal(res: unknown, onLimited: (retryAfterSeconds: number) => Error): Error {
  return res instanceof Error ? res : onLimited((res as RateLimiterRes).msBeforeNext / 1000);
}

/** A per-key request budget: throws 429 `Rate limit exceeded` with Retry-After past it. */
export async function consumeOrThrow(
  limiter: Pick<RateLimiterAbstract, 'consume'>,
  key: string,
  onLimited: (retryAfterSeconds: number) => Error,
): Promise<void> {
  try {
    await limiter.consume(key, 1);
  } catch (res) {
    throw refusal(res, onLimited);
  }
}
