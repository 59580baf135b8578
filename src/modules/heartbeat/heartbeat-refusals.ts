// Heartbeat abuse (docs/protocol.md 11.26): one activated session can send refused beats and starts as fast
// as it likes, and each used to cost an audit row. Refusals are now budgeted: 60 a minute per client
// session and 600 per IP, past which every beat and start of that session or IP answers 429 (signed,
// with Retry-After) before any work; and a session's refusals write at most one audit line a minute,
// the rest counted in metrics. Accepted beats cost nothing here: only refusals are counted.
//
// The budget is read only for a session or an address this worker refused in the last window: a beat
// from anyone else reads nothing (with Redis, two GETs a beat saved). A session or address refused on
// other workers only is thus stopped here from its first refusal on this worker: the budget holds to
// within one refusal per worker per window, and a valid beat is never answered 429 by a worker that
// never refused its sender.
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { KEYS, LIMITERS } from '../../platform/cluster/names.js';
import { rateLimited } from '../../errors.js';

const REFUSALS_PER_SESSION = 60;
const REFUSALS_PER_IP = 600;
const WINDOW_S = 60;
const AUDIT_EVERY_MS = 60_000;

export class HeartbeatRefusals {
  private readonly perSession: RateLimiterAbstract;
  private readonly perIp: RateLimiterAbstract;
  /** Sessions and addresses this worker counted a refusal of, and until when that counts. */
  private readonly refusedSessions = new Map<string, number>();
  private readonly refusedIps = new Map<string, number>();
  /** Refusals answered without an audit line (exported as a metric). */
  unaudited = 0;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly now: () => number,
  ) {
    this.perSession = coordinator.limiter({
      keyPrefix: LIMITERS.refusalsPerSession,
      points: REFUSALS_PER_SESSION,
      duration: WINDOW_S,
    });
    this.perIp = coordinator.limiter({
      keyPrefix: LIMITERS.refusalsPerIp,
      points: REFUSALS_PER_IP,
      duration: WINDOW_S,
    });
  }

  /**
   * Throws 429 when the session or the IP has used up its refusals this minute. Undefined (nothing to
   * wait for) when this worker refused neither in the window.
   */
  check(session: string, ip: string): Promise<void> | undefined {
    const now = this.now();
    if (!recent(this.refusedSessions, session, now) && !recent(this.refusedIps, ip, now)) return undefined;
    return this.read(session, ip);
  }

  private async read(session: string, ip: string): Promise<void> {
    const [s, i] = await Promise.all([this.perSession.get(session), this.perIp.get(ip)]);
    let wait = 0;
    if (s && s.consumedPoints >= REFUSALS_PER_SESSION) wait = s.msBeforeNext;
    if (i && i.consumedPoints >= REFUSALS_PER_IP) wait = Math.max(wait, i.msBeforeNext);
    if (wait > 0) throw rateLimited(wait / 1000);
  }

  /**
   * docs/protocol.md 11.39: a heartbeat call whose session is unknown or malformed has no session to budget;
   * it counts against its address alone. Throws 429 when the address has used up its refusals.
   */
  checkIp(ip: string): Promise<void> | undefined {
    if (!recent(this.refusedIps, ip, this.now())) return undefined;
    return this.perIp.get(ip).then((i) => {
      if (i && i.consumedPoints >= REFUSALS_PER_IP) throw rateLimited(i.msBeforeNext / 1000);
    });
  }

  /** Counts one refusal of a call whose session is unknown against its address. */
  async refusedIp(ip: string): Promise<void> {
    mark(this.refusedIps, ip, this.now() + WINDOW_S * 1000);
    await this.perIp.penalty(ip, 1);
  }

  /** Counts one refusal; true when it should write an audit line (the session's first this minute). */
  async refused(session: string, ip: string): Promise<boolean> {
    const until = this.now() + WINDOW_S * 1000;
    mark(this.refusedSessions, session, until);
    mark(this.refusedIps, ip, until);
    await Promise.all([this.perSession.penalty(session, 1), this.perIp.penalty(ip, 1)]);
    const audit = await this.coordinator.setIfAbsent(KEYS.refusalAudit(session), Buffer.alloc(0), AUDIT_EVERY_MS);
    if (!audit) this.unaudited++;
    return audit;
  }
}

/** Refused keys remembered at most (a flood of refusals from ever new sessions must not grow memory). */
const MAX_REMEMBERED = 100_000;

function mark(m: Map<string, number>, key: string, until: number): void {
  // Forgetting every key at the bound lets each of them through the check once more: within the bound.
  if (m.size >= MAX_REMEMBERED && !m.has(key)) m.clear();
  m.set(key, until);
}

function recent(m: Map<string, number>, key: string, now: number): boolean {
  const until = m.get(key);
  if (until === undefined) return false;
  if (until > now) return true;
  m.delete(key);
  return false;
}
