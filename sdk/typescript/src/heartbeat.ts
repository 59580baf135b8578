// A running heartbeat (PROTOCOL 6, SPEC heartbeat rules). Events:
//   'beat'      {index, count}            a beat whose signature and proof verified
//   'degraded'  {error, lost, reauthenticating}  a beat failed; lost = the token may have moved on
//   'recovered' {session}                 re-authentication opened a new heartbeat session
//   'killed'    {error}                   the server ended it (debugger, revoked, banned...): final
//   'stopped'   {reason}                  the loop has ended ('stop' or 'killed')
//   'revoked'   {reason, detail}          pushed on the realtime channel: key, user or app revoked; 'killed' follows
//   'update_required' {message, latestVersion, updateUrl}  pushed: force_update is on and this version is outdated
//   'notice'    {message, at}             pushed: a message from the vendor's dashboard
//   'channel'   {state, close?, error?}   the realtime channel opened ('open') or closed ('closed'); beats then use REST
// With the default transport the beats travel on the realtime channel (GET /api/client/ws) when the
// server offers it, and over REST whenever it is down; the token chain is the same on both.
// A beat that certainly never reached the server is sent again with the same index and token.
// A beat whose answer was lost cannot be (a replayed beat_index is refused, the new token is
// unknown): the heartbeat reports 'degraded' and, with `reauth`, runs init, the same activation
// and heartbeat/start again by itself; without it, it goes on with the next index and the old
// token, which works only if the server never saw the lost beat.
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
}

export interface BeatEvent { index: number; count: number }
export interface DegradedEvent { error: KeywardenError; lost: boolean; reauthenticating: boolean }
export interface RevokedEvent { reason: string; detail: string }
export interface UpdateRequiredEvent { message: string; latestVersion: string | undefined; updateUrl: string | undefined }
export interface NoticeEvent { message: string; at: Date | null }

/** Answers after which beating on is pointless. */
const FINAL: ReadonlySet<ErrorCode> = new Set(['heartbeat_killed', 'banned', 'expired', 'app_disabled', 'invalid_key', 'hwid_mismatch', 'update_required', 'key_used']);
/** Answers given before the beat was processed: the same beat may be sent again. */
const NOT_PROCESSED: ReadonlySet<ErrorCode> = new Set(['rate_limited', 'locked_out']);

function asKeywardenError(err: unknown): KeywardenError {
  return err instanceof KeywardenError ? err : new KeywardenError('server', String((err as Error)?.message ?? err), { cause: err });
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

  constructor(private readonly client: Client, readonly systemId: string, readonly codeHash: string,
    started: { session: string; token: string; beatInterval: number }, private readonly o: HeartbeatOptions,
    private readonly link?: ChannelLink) {
    super();
    this.session = started.session;
    this.token = started.token;
    this.interval = started.beatInterval;
    link?.attach((e) => this.onLink(e));
  }

  /** True while the beats travel on the realtime channel. */
  get onChannel(): boolean {
    return this.link?.ready === true;
  }

  private onLink(e: LinkEvent): void {
    if (this.ended) return;
    if (e.kind === 'state') {
      this.safeEmit('channel', { state: e.state, ...(e.close ? { close: e.close } : {}), ...(e.error ? { error: e.error } : {}) });
      return;
    }
    const p = e.push;
    if (p.type === 'revoked') {
      // A reply that came in the same read (the beat whose refusal caused this) is settled first.
      setImmediate(() => {
        if (this.ended) return;
        this.safeEmit('revoked', { reason: p.reason, detail: p.detail } satisfies RevokedEvent);
        this.kill(new KeywardenError('heartbeat_killed', `heartbeat_killed: revoked (${p.reason}): ${p.detail}`, { detail: p.detail }));
      });
    } else if (p.type === 'update_required') {
      this.safeEmit('update_required', { message: p.message, latestVersion: p.latestVersion, updateUrl: p.updateUrl } satisfies UpdateRequiredEvent);
    } else {
      this.safeEmit('notice', { message: p.message, at: p.at } satisfies NoticeEvent);
    }
  }

  /** On the channel when it is open; over REST when it is not, or went down before the call left. */
  private async send(op: 'heartbeat' | 'heartbeat/stop', body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.link?.ready) {
      try {
        return await this.link.call(op, body);
      } catch (err) {
        if (!(err instanceof KeywardenError && err.notSent)) throw err;
      }
    }
    return this.client.call(op, { session: this.session, ...body });
  }

  get beatInterval(): number { return this.interval; }
  get beatCount(): number { return this.count; }
  get running(): boolean { return !this.ended; }

  /** @internal */
  begin(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.ended) return;
    this.timer = setTimeout(() => {
      this.inflight = this.tick().finally(() => { this.inflight = undefined; });
    }, this.o.intervalMs ?? this.interval * 1000);
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
    const body: Record<string, unknown> = { session: this.session, token: previous, system_id: this.systemId, beat_index: index, code_hash: this.codeHash };
    if (this.o.codeSize !== undefined) body.code_size = this.o.codeSize;
    body.debugger_detected = (this.o.debuggerDetected ?? debuggerAttached)();
    try {
      // Client.call itself re-sends this same body (same index and token) while nothing was sent.
      const r = await this.send('heartbeat', body);
      if (typeof r.new_token !== 'string' || typeof r.beat_count !== 'number') throw verificationError('malformed', 'beat answer lacks new_token');
      if (!proofEquals(r.proof, beatProof(previous, this.session, index, r.new_token, r.beat_count))) throw verificationError('bad_proof', 'beat proof does not verify');
      this.token = r.new_token;
      this.lastIndex = index;
      this.count = r.beat_count;
      this.safeEmit('beat', { index, count: r.beat_count } satisfies BeatEvent);
    } catch (err) {
      const e = asKeywardenError(err);
      if (FINAL.has(e.code)) return this.kill(e);
      const lost = !(e.notSent || NOT_PROCESSED.has(e.code));
      if (lost) this.lastIndex = index; // that index may have been used: never send it again
      const reauth = lost && this.o.reauth !== undefined && this.o.reauth !== false;
      this.safeEmit('degraded', { error: e, lost, reauthenticating: reauth } satisfies DegradedEvent);
      if (reauth) {
        this.needsReauth = true;
        await this.recover();
      }
    }
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
      this.safeEmit('recovered', { session: started.session });
    } catch (err) {
      const e = asKeywardenError(err);
      if (FINAL.has(e.code)) return this.kill(e);
      this.safeEmit('degraded', { error: e, lost: true, reauthenticating: true } satisfies DegradedEvent);
    }
  }

  private kill(error: KeywardenError): void {
    if (this.ended) return;
    this.ended = true;
    if (this.timer) clearTimeout(this.timer);
    this.link?.close();
    this.safeEmit('killed', { error });
    this.safeEmit('stopped', { reason: 'killed' });
  }

  /** Stops beating, waits for a beat in flight and closes the heartbeat session. Never throws. */
  async stop(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
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
