// The grace period (docs/protocol.md 12.6): how long the license stays valid while the service cannot be
// reached. Only verified answers move it: each verified answer of license, login, register, trial,
// heartbeat/start or an accepted beat sets it to its grace_until (an answer without one, or with one
// that is not a strict ISO 8601 UTC time, grants none); a verified refusal ends it at once. An answer
// that fails verification never reaches this module.
import { parseUtcMs } from './utc.js';

/** The unix ms an answer grants, or undefined. */
export function graceUntilOf(answer: Record<string, unknown>): number | undefined {
  return parseUtcMs(answer.grace_until);
}

/** A verified answer that refuses: any 4xx but 429 (which says "not now", not "no"). */
export function isRefusal(status: number | undefined): boolean {
  return status !== undefined && status >= 400 && status < 500 && status !== 429;
}

/** The latest verified grace_until, shared by a client and its heartbeats. */
export class Grace {
  private untilMs: number | undefined;

  get until(): number | undefined {
    return this.untilMs;
  }

  note(answer: Record<string, unknown>): void {
    this.untilMs = graceUntilOf(answer);
  }

  end(): void {
    this.untilMs = undefined;
  }

  active(nowMs: number): boolean {
    return this.untilMs !== undefined && nowMs < this.untilMs;
  }
}
