// Heartbeat protocol (SPEC heartbeat endpoints and state table, PROTOCOL 6, 11.12-11.13) on top
// of the actor host. Kills and refusals are audited; kills deactivate the client session, so the
// client must authenticate again before a new start.
import { AppError } from '../errors.js';
import { hmacSha256, randomHex } from '../crypto/index.js';
import type { ClientCtx, ClientResult } from '../http/client-route.js';
import { HeartbeatHost } from '../actors/heartbeat-host.js';
import type { HeartbeatContext, KillReason, RejectReason } from '../actors/heartbeat.machine.js';
import type { AuditRepository } from '../db/repositories/audit.repository.js';
import type { Logger } from 'pino';
import type { ClientSessions } from './client-sessions.js';
import { beatInterval } from './apps.service.js';
import type { EventBus, LiveEvent } from './events.js';

export interface StartBody { session: string; system_id: string }
export interface BeatBody {
  session: string; token: string; system_id: string; beat_index: number;
  code_hash?: string; code_size?: number; debugger_detected?: boolean;
}
export interface StopBody { session: string; token: string }

const KILL_TEXT: Record<KillReason, string> = {
  system_id: 'system_id differs from start',
  no_code_hash: 'no code_hash on the first beat',
  code_changed: 'code_hash or code_size differs from the baseline',
  pinned_hash: 'code_hash differs from the pinned expected_binary_hash',
  drift: 'three drift warnings',
  debugger: 'debugger detected',
  revoked: 'license or user revoked',
};
const REJECT_TEXT: Record<RejectReason, string> = { token: 'wrong, stale or malformed token', replay: 'replayed beat_index' };

export function newHeartbeatToken(): string {
  return `TT${randomHex(16)}`;
}

export function startProof(session: string, systemId: string, token: string): string {
  return hmacSha256(session, `kwhs1\n${systemId}\n${token}`).toString('base64');
}

export function beatProof(previousToken: string, session: string, beatIndex: number, newToken: string, beatCount: number): string {
  return hmacSha256(previousToken, `kwhb1\n${session}\n${beatIndex}\n${newToken}\n${beatCount}`).toString('base64');
}

export interface HeartbeatServiceDeps {
  now: () => number;
  log: Logger;
  sessions: ClientSessions;
  audit: AuditRepository;
  events: EventBus;
  maxLiveActors?: number;
}

export class HeartbeatService {
  readonly host: HeartbeatHost;

  constructor(private readonly d: HeartbeatServiceDeps) {
    this.host = new HeartbeatHost({
      now: d.now,
      maxLive: d.maxLiveActors ?? 10_000,
      onExpired: (c) => d.log.debug({ appId: c.appId }, 'heartbeat.expired'),
    });
  }

  /**
   * Revocations arrive as live events from any worker: a deleted or banned key, or a banned user,
   * kills the sessions bound to it, so the copy stops at its next beat (PROTOCOL 11.10). A deleted
   * user's session is orphaned, not killed (SPEC "End user").
   */
  onEvent(e: LiveEvent): void {
    const d = e.data;
    if (e.kind === 'app.delete') this.dropApp(e.app_id);
    else if (e.kind === 'license.delete' || (e.kind === 'license.ban' && d.banned === true)) this.revoke((c) => c.licenseId === d.license_id);
    else if (e.kind === 'user.ban' && d.banned === true) this.revoke((c) => c.userId === d.user_id);
  }

  private revoke(match: (c: HeartbeatContext) => boolean): void {
    for (const c of this.host.contexts()) {
      if (!match(c)) continue;
      this.host.send(c.session, { type: 'KILL', reason: 'revoked' });
      this.d.audit.write({ appId: c.appId, action: 'heartbeat.kill', level: 'warning', detail: `Session killed: ${KILL_TEXT.revoked}` });
      void this.d.sessions.get(c.session).then((rec) => rec && this.d.sessions.deactivate(c.session, rec));
    }
  }

  countForApp(appId: string): number {
    let n = 0;
    for (const c of this.host.contexts()) if (c.appId === appId) n++;
    return n;
  }

  /** Ends every heartbeat session of an application (it was deleted). */
  dropApp(appId: string): number {
    let n = 0;
    for (const c of this.host.contexts()) {
      if (c.appId === appId) {
        this.host.remove(c.session);
        n++;
      }
    }
    return n;
  }

  startSweeper(): void {
    this.host.startSweeper();
  }

  close(): void {
    this.host.close();
  }

  /** SPEC "Session alive": a session with zero beats is alive; else the last beat is at most 3 intervals old. */
  isAlive(session: string): boolean {
    const c = this.host.peek(session);
    if (!c || c.expiresAt <= this.d.now()) return false;
    return c.beatCount === 0 || this.d.now() - c.lastBeatAt <= c.beatInterval * 3 * 1000;
  }

  async start(ctx: ClientCtx<StartBody>): Promise<ClientResult> {
    const s = ctx.session!;
    if (!this.d.sessions.isActivated(s.record)) throw new AppError('session_not_activated');
    if (this.host.has(s.token)) throw new AppError('heartbeat_exists');
    const token = newHeartbeatToken();
    const interval = beatInterval(ctx.app.row.heartbeat_interval);
    this.host.create({
      appId: ctx.app.row.id, session: s.token, token, systemId: ctx.body.system_id, beatInterval: interval, now: this.d.now(),
      userId: s.record.userId, licenseId: s.record.licenseId,
    });
    ctx.audit.detail = `Heartbeat started (interval ${interval}s)`;
    return { body: { success: true, token, beat_interval: interval, proof: startProof(s.token, ctx.body.system_id, token) } };
  }

  async beat(ctx: ClientCtx<BeatBody>): Promise<ClientResult> {
    const s = ctx.session!;
    const b = ctx.body;
    // The sweeper runs every second; a beat past the deadline must not slip through in between.
    const current = this.host.peek(s.token);
    if (current && current.expiresAt <= this.d.now()) this.host.remove(s.token);
    const newToken = newHeartbeatToken();
    const r = this.host.send(s.token, {
      type: 'BEAT',
      beat: {
        now: this.d.now(), token: b.token, systemId: b.system_id, beatIndex: b.beat_index, codeHash: b.code_hash, codeSize: b.code_size,
        debuggerDetected: b.debugger_detected, pinnedHash: ctx.app.row.expected_binary_hash, injectionDetection: ctx.app.row.injection_detection,
        newToken,
      },
    });
    if (!r) {
      ctx.audit.detail = '403 beat refused: no live heartbeat session';
      throw new AppError('heartbeat_rejected');
    }
    const v = r.verdict;
    if (v.kind === 'rejected') {
      ctx.audit.detail = `403 beat refused: ${REJECT_TEXT[v.reason]}`;
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'killed') {
      await this.killed(ctx, v.reason, r.before);
      throw new AppError('heartbeat_rejected');
    }
    const c = r.context as HeartbeatContext;
    if (v.kind === 'accepted' && v.drift) {
      ctx.audit.level = 'warning';
      ctx.audit.detail = `Beat ${b.beat_index} late: drift warning ${c.warnings} of 3`;
    } else {
      // Accepted beats are counted in metrics, not written one by one to the audit log.
      ctx.audit.skip = true;
    }
    return {
      body: { success: true, new_token: c.token, beat_count: c.beatCount, proof: beatProof(r.before.token, s.token, b.beat_index, c.token, c.beatCount) },
    };
  }

  async stop(ctx: ClientCtx<StopBody>): Promise<ClientResult> {
    const s = ctx.session!;
    const r = this.host.send(s.token, { type: 'STOP', token: ctx.body.token });
    if (!r || r.verdict.kind !== 'stopped') throw new AppError('heartbeat_token_invalid');
    ctx.audit.detail = `Heartbeat stopped after ${r.before.beatCount} beats`;
    await this.d.events.publish('heartbeat.stop', ctx.app.row.id, { user_id: r.before.userId, license_id: r.before.licenseId, beats: r.before.beatCount });
    return { body: { success: true } };
  }

  private async killed(ctx: ClientCtx<unknown>, reason: KillReason, before: HeartbeatContext): Promise<void> {
    ctx.audit.action = 'heartbeat.kill';
    ctx.audit.detail = `Session killed: ${KILL_TEXT[reason]}`;
    await this.d.events.publish('heartbeat.kill', ctx.app.row.id, { reason, ip: ctx.ip, user_id: before.userId, license_id: before.licenseId });
    const s = ctx.session!;
    const current = await this.d.sessions.get(s.token);
    if (current) await this.d.sessions.deactivate(s.token, current);
  }
}
