// A running heartbeat (docs/protocol.md 6, docs/spec.md "Heartbeat rules"). Events:
//   'beat'      {index, count}            a beat whose signature and proof verified
//   'degraded'  {error, lost, reauthenticating, lastBeatAt, verificationFailures}  a beat failed; lost = the token may
//               have moved on; lastBeatAt = when the last beat (or the start) verified. A beat in flight when the
//               heartbeat ended (revoked, killed, stopped) is not reported.
//   'compromised' {error, failures, lastBeatAt}  `compromisedAfter` verification failures in a row: answers are being
//               tampered with; automatic re-authentication stops (the program decides: stop, lock, carry on)
//   'recovered' {session}                 re-authentication opened a new heartbeat session
//   'killed'    {error}                   the server ended it (debugger, revoked, banned...): final
//   'stopped'   {reason}                  the loop has ended ('stop' or 'killed')
//   'revoked'   {reason, detail}          pushed on the realtime channel: key, user or app revoked; 'killed' follows
//   'expired'   {expiresAt, detail}       the license (or end user) expired while running (docs/protocol.md 12.8): pushed on the
//               channel as `revoked` with reason `expired`, or a beat refused (or unreachable) after the known
//               expiry; 'killed' follows with code 'expired'. The grace period never covers an expiry.
//   'update_required' {message, latestVersion, updateUrl}  pushed: force_update is on and this version is outdated
//   'notice'    {message, at}             pushed: a message from the vendor's dashboard
//   'channel'   {state, close?, error?}   the realtime channel opened ('open') or closed ('closed'); beats then use REST
//   'offline'   {error, graceUntil}       the service cannot be reached (network, timeout, 5xx) and the grace period
//               (docs/protocol.md 12.6) covers now: the license stays valid until graceUntil (state 'offline')
//   'grace_expired' {graceUntil, error}   still unreachable and the grace period is over: the program decides; the
//               heartbeat goes on trying. Every failed beat still emits 'degraded'. `state` leaves 'offline' the
//               moment graceUntil passes, without waiting for a beat.
// With the default transport the beats travel on the realtime channel (GET /api/client/ws) when the
// server offers it, and over REST whenever it is down; the token chain is the same on both.
// A beat that certainly never reached the server is sent again with the same index and token.
// A beat whose answer was lost cannot be (a replayed beat_index is refused, the new token is
// unknown): the heartbeat reports 'degraded' and, with `reauth`, runs init, the same activation
// and heartbeat/start again by itself; without it, it goes on with the next index and the old
// token, which works only if the server never saw the lost beat.
// A beat refused as `rejected` (403) right after the service was unreachable (network, timeout, 5xx)
// is a server that lost the session meanwhile (a restart): with `reauth` it re-authenticates once and
// goes on; if that fails (the key was banned meanwhile), `killed` carries that call's own error.
// Expiry (docs/protocol.md 12.8, docs/decisions.md): the server ends the session at expires_at. Knowing the expiry of
// the last verified activation, the heartbeat beats at most EXPIRY_CHECK_MS after it, so a REST client learns it on
// time too; a refusal then (or no answer at all) is reported as `expired`, an accepted beat means the key was
// extended. The local clock alone never ends a heartbeat the server still accepts.
import { EventEmitter } from 'node:events';
import type { ChannelLink, LinkEvent } from './channel.js';
import type { Client } from './client.js';
import { beatProof, proofEquals } from './crypto.js';
import { KeywardenError, verificationError, type ErrorCode } from './errors.js';
import { debuggerAttached } from './machine.js';

export interface HeartbeatOptions {
  /** Beat period; default the server's beat_interval. Beating faster is allowed (only late beats drift). */
  intervalMs?: number;
  codeSize?: number;
  /** Asked before every beat; default: is the Node inspector open. */
  debuggerDetected?: () => boolean;
  /** Re-authenticate after a lost beat: true repeats the client's last login/license; a function does it your way. */
  reauth?: boolean | ((client: Client) => Promise<void>);
  /** 'auto' (default): the realtime channel when the server offers it (and the client uses the default transport); 'off': REST only. */
  channel?: 'auto' | 'off';
  /** Verification failures in a row (beats or re-authentication) after which 'compromised' is emitted. Default 5. */
  compromisedAfter?: number;
}

/**
 * healthy: the last beat verified; offline: the service cannot be reached and the grace period covers
 * now; degraded: the last beat failed (see lastBeatAt); compromised: `compromisedAfter` verification
 * failures in a row; revoked, expired (the license expired while running), killed, stopped: ended.
 */
export type HeartbeatState =
  'healthy' | 'offline' | 'degraded' | 'compromised' | 'revoked' | 'expired' | 'killed' | 'stopped';

export interface BeatEvent {
  index: number;
  count: number;
}
export interface DegradedEvent {
  error: KeywardenError;
  lost: boolean;
  reauthenticating: boolean;
  /** When the last beat verified (the verified heartbeat/start before the first beat). */
  lastBeatAt: Date;
  /** Verification failures in a row, this one included. */
  verificationFailures: number;
}
export interface CompromisedEvent {
  error: KeywardenError;
  failures: number;
  lastBeatAt: Date;
}
export interface RevokedEvent {
  reason: string;
  detail: string;
}
/** The license (or end user) expired while running; the heartbeat has ended ('killed' follows). */
export interface ExpiredEvent {
  /** The expiry the client knew from its last verified activation, or null. */
  expiresAt: Date | null;
  detail: string;
}
export interface UpdateRequiredEvent {
  message: string;
  latestVersion: string | undefined;
  updateUrl: string | undefined;
}
export interface NoticeEvent {
  message: string;
  at: Date | null;
}
/** The license stays valid until graceUntil while the service cannot be reached. */
export interface OfflineEvent {
  error: KeywardenError;
  graceUntil: Date;
}
/** The grace period ended while the service still cannot be reached. */
export interface GraceExpiredEvent {
  graceUntil: Date;
  error: KeywardenError;
}

/** Answers after which beating on is pointless. */
const FINAL: ReadonlySet<ErrorCode> = new Set([
  'heartbeat_killed',
  'banned',
  'expired',
  'app_disabled',
  'invalid_key',
  'hwid_mismatch',
  'update_required',
  'key_used',
]);
/** How long after the known expiry the heartbeat beats at the latest (the server ends the session within 1 s). */
export const EXPIRY_CHECK_MS = 1000;
/**
 * The clock learned from the server is exact to the second (X-Response-Timestamp), so a beat refused up to this
 * long before the known expiry is the expiry too; a beat accepted this long after it means the key was extended.
 */
const EXPIRY_SLACK_MS = 1000;
/** Answers given before the beat was processed: the same beat may be sent again. */
const NOT_PROCESSED: ReadonlySet<ErrorCode> = new Set(['rate_limited', 'locked_out']);

/** The service could not be reached or could not answer: a connection error, a timeout, a 5xx. */
function unreachable(e: KeywardenError): boolean {
  return e.code === 'network' || e.code === 'timeout' || (e.status !== undefined && e.status >= 500);
}

/** A beat refused as `rejected`: a kill, a wrong token, a replay, or a heartbeat session the server does not have. */
function refusedBeat(e: KeywardenError): boolean {
  return e.code === 'heartbeat_killed' && e.status === 403;
}

function asKeywardenError(err: unknown): KeywardenError {
  return err instanceof KeywardenError
    ? err
    : new KeywardenError('server', String((err as Error)?.message ?? err), { cause: err });
}

export class Heartbeat extends EventEmitter {
  private session: string;
  private token: string;
  private interval: number;
  private lastIndex = 0;
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  private needsReauth = false;
  private ended = false;
  private current: HeartbeatState = 'healthy';
  private lastVerified: Date;
  /** Verification failures in a row (reset by a verified beat). */
  private verificationFailures = 0;
  /** Set once 'compromised' was emitted: no automatic re-authentication until a beat verifies. */
  private compromised = false;
  /** The previous attempt found the service unreachable. */
  private afterOutage = false;
  /** The one re-authentication a `rejected` after an outage allows was spent (reset by a verified beat). */
  private outageReauthSpent = false;
  /** 'offline' emitted, and neither a verified beat nor 'grace_expired' since. */
  private offlineTold = false;
  private readonly compromisedAfter: number;

  constructor(
    private readonly client: Client,
    readonly systemId: string,
    readonly codeHash: string,
    started: { session: string; token: string; beatInterval: number },
    private readonly o: HeartbeatOptions,
    private readonly link?: ChannelLink,
  ) {
    super();
    this.session = started.session;
    this.token = started.token;
    this.interval = started.beatInterval;
    this.lastVerified = new Date(client.clock());
    const n = o.compromisedAfter ?? 5;
    if (!Number.isInteger(n) || n < 1) throw new TypeError('compromisedAfter must be a positive integer');
    this.compromisedAfter = n;
    link?.attach((e) => this.onLink(e));
  }

  /** healthy, offline, degraded, compromised, or how it ended: revoked, expired, killed, stopped. */
  get state(): HeartbeatState {
    // Offline lasts exactly as long as the grace: past graceUntil it reads degraded, before the next beat fails.
    if (this.current === 'offline' && !this.client.graceActive()) return 'degraded';
    return this.current;
  }

  /** The known expiry is less than `marginMs` away or has passed (server-corrected clock). */
  private pastExpiry(marginMs = 0): boolean {
    const at = this.client.expiresAt;
    return at !== null && this.client.serverNow() + marginMs >= at.getTime();
  }

  /** When the last beat verified (the verified heartbeat/start before the first beat). */
  get lastBeatAt(): Date {
    return this.lastVerified;
  }

  /** True while the beats travel on the realtime channel. */
  get onChannel(): boolean {
    return this.link?.ready === true;
  }

  private onLink(e: LinkEvent): void {
    if (this.ended) return;
    if (e.kind === 'state') {
      this.safeEmit('channel', {
        state: e.state,
        ...(e.close ? { close: e.close } : {}),
        ...(e.error ? { error: e.error } : {}),
      });
      return;
    }
    const p = e.push;
    if (p.type === 'revoked' && p.reason === 'expired') {
      setImmediate(() => this.expire(p.detail));
    } else if (p.type === 'revoked') {
      // A reply that came in the same read (the beat whose refusal caused this) is settled first.
      setImmediate(() => {
        if (this.ended) return;
        this.current = 'revoked';
        this.safeEmit('revoked', { reason: p.reason, detail: p.detail } satisfies RevokedEvent);
        this.kill(
          new KeywardenError('heartbeat_killed', `heartbeat_killed: revoked (${p.reason}): ${p.detail}`, {
            detail: p.detail,
          }),
          'revoked',
        );
      });
    } else if (p.type === 'update_required') {
      this.safeEmit('update_required', {
        message: p.message,
        latestVersion: p.latestVersion,
        updateUrl: p.updateUrl,
      } satisfies UpdateRequiredEvent);
    } else {
      this.safeEmit('notice', { message: p.message, at: p.at } satisfies NoticeEvent);
    }
  }

  /** On the channel when it is open; over REST when it is not, or went down before the call left. */
  private async send(
    op: 'heartbeat' | 'heartbeat/stop',
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (this.link?.ready) {
      try {
        return await this.link.call(op, body);
      } catch (err) {
        if (!(err instanceof KeywardenError && err.notSent)) throw err;
      }
    }
    return this.client.call(op, { session: this.session, ...body });
  }

  get beatInterval(): number {
    return this.interval;
  }
  get beatCount(): number {
    return this.count;
  }
  get running(): boolean {
    return !this.ended;
  }

  /** @internal */
  begin(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.ended) return;
    let delay = this.o.intervalMs ?? this.interval * 1000;
    const until = this.client.grace.until;
    // Offline, wake when the grace period ends, so grace_expired is told on time.
    if (this.current === 'offline' && until !== undefined)
      delay = Math.min(delay, Math.max(0, until - this.client.serverNow()));
    // The license expires before the next beat: beat just after, so the end is known on time over REST too.
    const expiry = this.client.expiresAt;
    const toExpiry = expiry === null ? -1 : expiry.getTime() - this.client.serverNow();
    if (toExpiry >= 0) delay = Math.min(delay, toExpiry + EXPIRY_CHECK_MS);
    this.timer = setTimeout(() => {
      this.inflight = this.tick().finally(() => {
        this.inflight = undefined;
      });
    }, delay);
  }

  /** Never throws: every outcome becomes an event. */
  private async tick(): Promise<void> {
    try {
      if (this.needsReauth) await this.recover();
      else await this.beatOnce();
    } catch (err) {
      this.client.log.error?.('keywarden.heartbeat.unexpected', { error: String(err) });
    }
    this.schedule();
  }

  private async beatOnce(): Promise<void> {
    const index = this.lastIndex + 1;
    const previous = this.token;
    const body: Record<string, unknown> = {
      session: this.session,
      token: previous,
      system_id: this.systemId,
      beat_index: index,
      code_hash: this.codeHash,
    };
    if (this.o.codeSize !== undefined) body.code_size = this.o.codeSize;
    body.debugger_detected = (this.o.debuggerDetected ?? debuggerAttached)();
    try {
      // Client.call itself re-sends this same body (same index and token) while nothing was sent.
      const r = await this.send('heartbeat', body);
      if (typeof r.new_token !== 'string' || typeof r.beat_count !== 'number')
        throw verificationError('malformed', 'beat answer lacks new_token');
      if (!proofEquals(r.proof, beatProof(previous, this.session, index, r.new_token, r.beat_count)))
        throw verificationError('bad_proof', 'beat proof does not verify');
      this.client.grace.note(r);
      // Accepted well after it: the key was extended meanwhile (its new expiry is not known here).
      if (this.pastExpiry(-EXPIRY_CHECK_MS - EXPIRY_SLACK_MS)) this.client.forgetExpiry();
      this.token = r.new_token;
      this.lastIndex = index;
      this.count = r.beat_count;
      this.lastVerified = new Date(this.client.clock());
      this.verificationFailures = 0;
      this.compromised = false;
      this.afterOutage = false;
      this.outageReauthSpent = false;
      this.offlineTold = false;
      this.current = 'healthy';
      this.safeEmit('beat', { index, count: r.beat_count } satisfies BeatEvent);
    } catch (err) {
      if (this.ended) return; // ended meanwhile (revoked, killed, stopped): this beat's failure is no degradation
      const e = asKeywardenError(err);
      // Past the known expiry a refused beat is the server's end of it, and no answer grants no grace.
      if ((refusedBeat(e) && this.pastExpiry(EXPIRY_SLACK_MS)) || (unreachable(e) && this.pastExpiry()))
        return this.expire(e.message, e);
      const reauthOn = this.o.reauth !== undefined && this.o.reauth !== false;
      // A server that came back without this session answers `rejected`: worth one re-authentication.
      const lostSession = refusedBeat(e) && this.afterOutage && reauthOn && !this.outageReauthSpent;
      if (FINAL.has(e.code) && !lostSession) return this.kill(e);
      if (lostSession) this.outageReauthSpent = true;
      const lost = !(e.notSent || NOT_PROCESSED.has(e.code));
      if (lost) this.lastIndex = index; // that index may have been used: never send it again
      const reauth = this.failed(e, lost, lost && reauthOn);
      if (reauth) {
        this.needsReauth = true;
        await this.recover();
      }
    }
  }

  /**
   * Books a failure and emits 'degraded' (and 'compromised' when the streak of verification
   * failures reaches the limit). Returns whether to re-authenticate: not once compromised, since
   * an attacker who spoils every answer would have it spend the program's rate limits for nothing.
   * While the service is unreachable and the grace period covers now, the state is 'offline' ('offline'
   * emitted on entering it); once the grace is over 'grace_expired' is emitted.
   */
  private failed(e: KeywardenError, lost: boolean, wantsReauth: boolean): boolean {
    this.client.noteRefusal(e.status); // a refusal on the realtime channel never went through Client.call
    const away = unreachable(e);
    const until = this.client.grace.until;
    const covered = away && this.client.graceActive();
    if (e.code === 'verification') this.verificationFailures++;
    this.afterOutage = away;
    const newlyCompromised = !this.compromised && this.verificationFailures >= this.compromisedAfter;
    if (newlyCompromised) this.compromised = true;
    const reauth = wantsReauth && !this.compromised;
    if (!reauth) this.needsReauth = false;
    this.current = this.compromised ? 'compromised' : covered ? 'offline' : 'degraded';
    const goingOffline = covered && !this.compromised && !this.offlineTold;
    const graceOver = away && !covered && this.offlineTold && until !== undefined;
    if (goingOffline) this.offlineTold = true;
    if (graceOver || until === undefined) this.offlineTold = false;
    const lastBeatAt = this.lastVerified;
    this.safeEmit('degraded', {
      error: e,
      lost,
      reauthenticating: reauth,
      lastBeatAt,
      verificationFailures: this.verificationFailures,
    } satisfies DegradedEvent);
    if (goingOffline && until !== undefined) {
      this.client.log.warn?.('keywarden.heartbeat.offline', {
        error: e.message,
        graceUntil: new Date(until).toISOString(),
      });
      this.safeEmit('offline', { error: e, graceUntil: new Date(until) } satisfies OfflineEvent);
    }
    if (graceOver) {
      this.client.log.warn?.('keywarden.heartbeat.grace_expired', { graceUntil: new Date(until).toISOString() });
      this.safeEmit('grace_expired', { graceUntil: new Date(until), error: e } satisfies GraceExpiredEvent);
    }
    if (newlyCompromised) {
      this.client.log.warn?.('keywarden.heartbeat.compromised', {
        failures: this.verificationFailures,
        reason: e.reason,
      });
      this.safeEmit('compromised', {
        error: e,
        failures: this.verificationFailures,
        lastBeatAt,
      } satisfies CompromisedEvent);
    }
    return reauth;
  }

  /** init + activation + heartbeat/start again; on failure tries again at the next tick. */
  private async recover(): Promise<void> {
    try {
      if (typeof this.o.reauth === 'function') await this.o.reauth(this.client);
      else await this.client.reauthenticate();
      const started = await this.client.openHeartbeat(this.systemId, this.link);
      if (this.ended) return;
      this.session = started.session;
      this.token = started.token;
      this.interval = started.beatInterval;
      this.lastIndex = 0;
      this.count = 0;
      this.needsReauth = false;
      this.afterOutage = false;
      this.safeEmit('recovered', { session: started.session });
    } catch (err) {
      const e = asKeywardenError(err);
      if (this.pastExpiry() && unreachable(e)) return this.expire(e.message, e);
      // The call's own error (e.g. banned: the key was banned meanwhile), not a generic one.
      if (FINAL.has(e.code)) return this.kill(e);
      this.failed(e, true, true);
    }
  }

  /** The license expired: 'expired', then 'killed' with code `expired`. */
  private expire(detail: string, cause?: KeywardenError): void {
    if (this.ended) return;
    this.kill(
      new KeywardenError('expired', `expired: the license expired while running (${detail})`, {
        detail,
        ...(cause ? { status: cause.status, cause } : {}),
      }),
    );
  }

  private kill(error: KeywardenError, state: 'killed' | 'revoked' = 'killed'): void {
    if (this.ended) return;
    this.client.grace.end(); // every kill is a verified refusal, a revocation or an expiry: no grace after it
    this.ended = true;
    this.current = error.code === 'expired' ? 'expired' : state;
    if (this.timer) clearTimeout(this.timer);
    this.link?.close();
    if (error.code === 'expired') {
      const at = this.client.expiresAt;
      this.client.log.warn?.('keywarden.heartbeat.expired', { expiresAt: at?.toISOString() ?? null });
      this.safeEmit('expired', { expiresAt: at, detail: String(error.detail ?? error.message) } satisfies ExpiredEvent);
    }
    this.safeEmit('killed', { error });
    this.safeEmit('stopped', { reason: 'killed' });
  }

  /** Stops beating, waits for a beat in flight and closes the heartbeat session. Never throws. */
  async stop(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.current = 'stopped';
    if (this.timer) clearTimeout(this.timer);
    await this.inflight;
    try {
      await this.send('heartbeat/stop', { token: this.token });
    } catch (err) {
      this.client.log.warn?.('keywarden.heartbeat.stop_failed', { error: String(err) });
    }
    this.link?.close();
    this.safeEmit('stopped', { reason: 'stop' });
  }

  /** A listener that throws must not end the loop or reach the event loop as an uncaught error. */
  private safeEmit(event: string, payload: unknown): void {
    try {
      this.emit(event, payload);
    } catch (err) {
      this.client.log.error?.('keywarden.heartbeat.listener_threw', { event, error: String(err) });
    }
  }
}
