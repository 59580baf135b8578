// Heartbeat abuse (PROTOCOL 11.26): one activated session can send refused beats and starts as fast
// as it likes, and each used to cost an audit row. Refusals are now budgeted: 60 a minute per client
// session and 600 per IP, past which every beat and start of that session or IP answers 429 (signed,
// with Retry-After) before any work; and a session's refusals write at most one audit line a minute,
// the rest counted in metrics. Accepted beats cost nothing here: only refusals are counted.
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { rateLimited } from '../../errors.js';

const REFUSALS_PER_SESSION = 60;
const REFUSALS_PER_IP = 600;
const WINDOW_S = 60;
const AUDIT_EVERY_MS = 60_000;

export class HeartbeatRefusals {
  private readonly perSession: RateLimiterAbstract;
  private readonly perIp: RateLimiterAbstract;
  /** Refusals answered without an audit line (exported as a metric). */
  unaudited = 0;

  constructor(private readonly coordinator: Coordinator) {
    this.perSession = coordinator.limiter({ keyPrefix: 'hbref:s', points: REFUSALS_PER_SESSION, duration: WINDOW_S });
    this.perIp = coordinator.limiter({ keyPrefix: 'hbref:ip', points: REFUSALS_PER_IP, duration: WINDOW_S });
  }

  /** Throws 429 when the session or the IP has used up its refusals this minute. */
  async check(session: string, ip: string): Promise<void> {
    const [s, i] = await Promise.all([this.perSession.get(session), this.perIp.get(ip)]);
    let wait = 0;
    if (s && s.consumedPoints >= REFUSALS_PER_SESSION) wait = s.msBeforeNext;
    if (i && i.consumedPoints >= REFUSALS_PER_IP) wait = Math.max(wait, i.msBeforeNext);
    if (wait > 0) throw rateLimited(wait / 1000);
  }

  /** Counts one refusal; true when it should write an audit line (the session's first this minute). */
  async refused(session: string, ip: string): Promise<boolean> {
    await Promise.all([this.perSession.penalty(session, 1), this.perIp.penalty(ip, 1)]);
    const audit = await this.coordinator.setIfAbsent(`hbref:a:${session}`, Buffer.alloc(0), AUDIT_EVERY_MS);
    if (!audit) this.unaudited++;
    return audit;
  }
}
