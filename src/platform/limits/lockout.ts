// Failed-attempt lockouts (PROTOCOL 2, 7, 11.4) on rate-limiter-flexible, shared by all workers
// through the coordinator. The Nth failure still answers normally; from then on the key is
// blocked for `lockSeconds` and every attempt, even a correct one, answers 429.
import type { RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import type { Coordinator } from '../cluster/coordinator.js';
import { lockedOut } from '../../errors.js';

interface LockoutPolicy {
  name: string;
  failures: number;
  windowSeconds: number;
  lockSeconds: number;
}

export class Lockout {
  private readonly limiter: RateLimiterAbstract;

  constructor(
    coordinator: Coordinator,
    private readonly policy: LockoutPolicy,
  ) {
    this.limiter = coordinator.limiter({
      keyPrefix: `lock:${policy.name}`,
      points: policy.failures,
      duration: policy.windowSeconds,
    });
  }

  /** Throws 429 when any of the keys is locked. */
  async check(keys: readonly string[]): Promise<void> {
    const states = await Promise.all(keys.map((k) => this.limiter.get(k)));
    let wait = 0;
    for (const s of states) if (s && s.consumedPoints >= this.policy.failures) wait = Math.max(wait, s.msBeforeNext);
    if (wait > 0) throw lockedOut(wait / 1000);
  }

  /** Records one failure against every key; the key reaching the limit is locked. */
  async fail(keys: readonly string[]): Promise<void> {
    await Promise.all(
      keys.map(async (k) => {
        const r: RateLimiterRes = await this.limiter.penalty(k, 1);
        if (r.consumedPoints === this.policy.failures) await this.limiter.block(k, this.policy.lockSeconds);
      }),
    );
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
