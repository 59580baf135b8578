// The receiving side of heartbeats: the client calls start, beat and stop, after the client gate,
// on whichever worker took the request (REST or the realtime channel). It keeps the refusal budget,
// draws the next token, sends the operation to the owner of the session's shard (this worker in the
// usual case: init drew the session on a shard it owns) and turns the owner's verdict into the
// answer with its proof and its audit note. Kills deactivate the client session.
import type { Logger } from 'pino';
import { AppError, ValidationError } from '../../errors.js';
import { hmacSha256Base64, randomHex } from '../../platform/crypto/index.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { NotOwner, shardOf, type ShardNode } from '../../platform/cluster/cluster-node.js';
import { outcome } from '../client/index.js';
import type {
  BeatRequest,
  StartRequest,
  StopRequest,
  AuditNote,
  ClientCall,
  ClientOutcome,
  ClientSessions,
} from '../client/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import { beatInterval } from './beat-interval.js';
import { hwidHash, sessionAlive, type KillReason } from './heartbeat.machine.js';
import { HeartbeatRefusals } from './heartbeat-refusals.js';
import type { BeatCounts } from './beat-counts.js';
import {
  KILL_TEXT,
  REJECT_TEXT,
  type BeatArgs,
  type HeartbeatOps,
  type HeartbeatOwner,
  type StartArgs,
  type StopArgs,
} from './heartbeat.owner.js';

function newHeartbeatToken(): string {
  return `TT${randomHex(16)}`;
}

export function startProof(session: string, systemId: string, token: string): string {
  return hmacSha256Base64(session, `kwhs1\n${systemId}\n${token}`);
}

export function beatProof(
  previousToken: string,
  session: string,
  beatIndex: number,
  newToken: string,
  beatCount: number,
): string {
  return hmacSha256Base64(previousToken, `kwhb1\n${session}\n${beatIndex}\n${newToken}\n${beatCount}`);
}

interface HeartbeatGatewayDeps {
  now: () => number;
  log: Logger;
  sessions: ClientSessions;
  events: EventBus;
  coordinator: Coordinator;
  node: ShardNode<HeartbeatOps>;
  owner: HeartbeatOwner;
  webhooks: Pick<WebhookService, 'notify'>;
  /** A key's own max_sessions (null: the application's) and its reseller; null when the key is gone. */
  keySeats: (licenseId: string) => Promise<{ maxSessions: number | null; resellerId: string | null } | null>;
  /**
   * docs/protocol.md 12.6: the grace the start and every accepted beat carry (`{grace_until}`, or nothing when
   * the application grants none). Looked up per answer, so an extension or a ban shows at once.
   */
  grace?: (
    app: { grace_hours: number },
    s: { userId: string | null; licenseId: string | null },
  ) => Promise<{ grace_until?: string }>;
  /** Counts accepted beats per application and hour (the beats chart); synchronous, never awaited. */
  beats?: Pick<BeatCounts, 'count'>;
}

export class HeartbeatGateway {
  /** The refusal budget of sessions and addresses. */
  readonly refusals: HeartbeatRefusals;

  constructor(private readonly d: HeartbeatGatewayDeps) {
    this.refusals = new HeartbeatRefusals(d.coordinator, d.now);
  }

  /** Kills one session as revoked (or expired), on whichever worker owns it; false when it had none. */
  async revoke(session: string, reason: Extract<KillReason, 'revoked' | 'expired'> = 'revoked'): Promise<boolean> {
    return (
      (await this.route(session, 'hb.kill', { session, reason }, () => this.d.owner.killOwned(session, reason))) > 0
    );
  }

  /**
   * Runs an operation on the owner of the session's shard. When this worker holds the shard (the
   * usual case: init drew the session on one of ours) the owner is called directly, with no lookup
   * or cluster hop; only when the shard is elsewhere, or moved away meanwhile (`NotOwner`), does the
   * cluster node find the owner and forward the call.
   */
  private route<K extends keyof HeartbeatOps & string>(
    session: string,
    op: K,
    args: HeartbeatOps[K]['args'],
    here: () => HeartbeatOps[K]['result'] | Promise<HeartbeatOps[K]['result']>,
  ): HeartbeatOps[K]['result'] | Promise<HeartbeatOps[K]['result']> {
    const shard = shardOf(session);
    if (this.d.node.fenceOf(shard) === undefined) return this.forward(shard, op, args, here);
    let result: HeartbeatOps[K]['result'] | Promise<HeartbeatOps[K]['result']>;
    try {
      result = here();
    } catch (err) {
      if (!(err instanceof NotOwner)) throw err;
      return this.forward(shard, op, args, here);
    }
    if (!(result instanceof Promise)) {
      this.d.node.noteLocal();
      return result;
    }
    return result.then(
      (r) => {
        this.d.node.noteLocal();
        return r;
      },
      (err: unknown) => {
        if (!(err instanceof NotOwner)) throw err;
        return this.forward(shard, op, args, here);
      },
    );
  }

  /** Lets the cluster node find the shard's owner and send it the operation (this worker, if it is). */
  private forward<K extends keyof HeartbeatOps & string>(
    shard: number,
    op: K,
    args: HeartbeatOps[K]['args'],
    here: () => HeartbeatOps[K]['result'] | Promise<HeartbeatOps[K]['result']>,
  ): Promise<HeartbeatOps[K]['result']> {
    return this.d.node.route(shard, op, args, async () => here());
  }

  /**
   * docs/spec.md "Session alive": a session with zero beats is alive; else the last beat is at most 3 intervals old.
   */
  async isAlive(session: string): Promise<boolean> {
    const c = await this.d.owner.stateOf(session);
    return c !== undefined && sessionAlive(c, this.d.now());
  }

  start(call: ClientCall<StartRequest>): Promise<ClientOutcome> {
    return outcome(async (note) => this.budgeted(call, note, () => this.runStart(call, note)));
  }

  /**
   * Runs a start or a beat within the session's and the IP's refusal budget (docs/protocol.md 11.26): over
   * it, 429 before any work; a refusal is counted and audited at most once a minute per session.
   * Synchronous when `run` is and nothing was refused lately.
   */
  private budgeted<T>(call: ClientCall<unknown>, note: AuditNote, run: () => T | Promise<T>): T | Promise<T> {
    try {
      const over = this.refusals.check(call.session!.token, call.ip);
      const result = over ? over.then(run) : run();
      return result instanceof Promise ? result.catch((err: unknown) => this.refused(call, note, err)) : result;
    } catch (err) {
      return this.refused(call, note, err);
    }
  }

  /** Counts a refusal against the budget (audited only when it is the first in its minute), then rethrows. */
  private async refused(call: ClientCall<unknown>, note: AuditNote, err: unknown): Promise<never> {
    if (err instanceof AppError || err instanceof ValidationError) {
      if (!(await this.refusals.refused(call.session!.token, call.ip))) note.skip = true;
    }
    throw err;
  }

  private async runStart(call: ClientCall<StartRequest>, note: AuditNote) {
    const s = call.session!;
    if (!this.d.sessions.isActivated(s.record)) throw new AppError('session_not_activated');
    const token = newHeartbeatToken();
    const interval = beatInterval(call.app.row.heartbeat_interval);
    const args: StartArgs = {
      session: s.token,
      appId: call.app.row.id,
      systemId: call.body.system_id,
      beatInterval: interval,
      token,
      userId: s.record.userId,
      licenseId: s.record.licenseId,
      hwidHash: s.record.hwid ? hwidHash(s.record.hwid) : null,
    };
    const seat = await this.takeSeat(call, note);
    try {
      await this.route(s.token, 'hb.start', args, () => this.d.owner.startHere(args));
    } catch (err) {
      if (seat?.added) this.d.owner.seats.releaseLater(s.record.licenseId, s.token);
      throw err;
    }
    note.detail = `Heartbeat started (interval ${interval}s)`;
    return {
      body: {
        success: true,
        token,
        beat_interval: interval,
        proof: startProof(s.token, call.body.system_id, token),
        ...(await this.graceOf(call, s.record)),
      },
    };
  }

  /**
   * docs/protocol.md 12.2: the start takes a seat of its key (an end user's session, its user's key) before
   * its heartbeat session exists; a session kicked to make room is announced like every kill.
   */
  private async takeSeat(call: ClientCall<StartRequest>, note: AuditNote) {
    const s = call.session!;
    const licenseId = s.record.licenseId;
    if (!licenseId) return undefined;
    const app = call.app.row;
    const key = await this.d.keySeats(licenseId);
    try {
      const seat = await this.d.owner.seats.claim({
        licenseId,
        session: s.token,
        max: key?.maxSessions ?? app.max_sessions,
        overflow: app.session_overflow,
      });
      const resellerId = key?.resellerId ?? null;
      for (const k of seat.kicked) {
        const data = { reason: 'session_limit', user_id: k.userId, license_id: licenseId };
        await this.d.events.publish('heartbeat.kill', app.id, data, resellerId);
        this.d.webhooks.notify(app.id, resellerId, 'heartbeat.kill', data);
      }
      return seat;
    } catch (err) {
      if (err instanceof AppError && err.code === 'session_limit')
        note.detail = '409 start refused: concurrent session limit reached';
      throw err;
    }
  }

  /** Synchronous end to end when this worker owns the session and needs no write to be waited for. */
  beat(call: ClientCall<BeatRequest>): ClientOutcome | Promise<ClientOutcome> {
    return outcome((note) => this.budgeted(call, note, () => this.runBeat(call, note)));
  }

  private runBeat(call: ClientCall<BeatRequest>, note: AuditNote) {
    const s = call.session!;
    const b = call.body;
    const args: BeatArgs = {
      session: s.token,
      beat: {
        now: this.d.now(),
        token: b.token,
        systemId: b.system_id,
        beatIndex: b.beat_index,
        codeHash: b.code_hash,
        codeSize: b.code_size,
        debuggerDetected: b.debugger_detected,
        pinnedHash: call.app.row.expected_binary_hash,
        injectionDetection: call.app.row.injection_detection,
        newToken: newHeartbeatToken(),
      },
    };
    const r = this.route(s.token, 'hb.beat', args, () => this.d.owner.beatHere(args));
    return r instanceof Promise
      ? r.then((r) => this.answerBeat(call, note, args, r))
      : this.answerBeat(call, note, args, r);
  }

  private answerBeat(
    call: ClientCall<BeatRequest>,
    note: AuditNote,
    args: BeatArgs,
    r: HeartbeatOps['hb.beat']['result'],
  ): { body: Record<string, unknown> } | Promise<{ body: Record<string, unknown> }> {
    const v = r.verdict;
    if (!v) {
      note.detail = '403 beat refused: no live heartbeat session';
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'rejected') {
      note.detail = `403 beat refused: ${REJECT_TEXT[v.reason]}`;
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'killed') return this.killedByBeat(call, note, v.reason, r);
    const b = call.body;
    if (v.kind === 'accepted') this.d.beats?.count(call.app.row.id, r.licenseId, r.userId, args.beat.now);
    if (v.kind === 'accepted' && v.drift) {
      note.level = 'warning';
      note.detail = `Beat ${b.beat_index} late: drift warning ${r.warnings} of 3`;
    } else {
      // Accepted beats are counted in metrics, not written one by one to the audit log.
      note.skip = true;
    }
    const body = {
      success: true,
      new_token: r.token,
      beat_count: r.beatCount,
      proof: beatProof(r.previousToken, call.session!.token, b.beat_index, r.token, r.beatCount),
    };
    // The grace of the key (or user) the heartbeat session was started with, as its owner holds it.
    const grace = this.graceOf(call, r);
    return grace ? grace.then((g) => ({ body: { ...body, ...g } })) : { body };
  }

  private async killedByBeat(
    call: ClientCall<BeatRequest>,
    note: AuditNote,
    reason: KillReason,
    r: HeartbeatOps['hb.beat']['result'],
  ): Promise<never> {
    const token = call.session!.token;
    note.action = 'heartbeat.kill';
    note.detail = `Session killed: ${KILL_TEXT[reason]}`;
    const current = await this.d.sessions.get(token);
    if (current) await this.d.sessions.deactivate(token, current);
    this.d.owner.killed(token);
    await this.d.events.publish('heartbeat.kill', call.app.row.id, {
      reason,
      ip: call.ip,
      user_id: r.userId,
      license_id: r.licenseId,
    });
    throw new AppError('heartbeat_rejected');
  }

  /** The answer's grace (docs/protocol.md 12.6); undefined when the application grants none (nothing to wait for). */
  private graceOf(
    call: ClientCall<unknown>,
    of: { userId: string | null; licenseId: string | null },
  ): Promise<{ grace_until?: string }> | undefined {
    const app = call.app.row;
    if (!this.d.grace || app.grace_hours <= 0) return undefined;
    return this.d.grace(app, of);
  }

  stop(call: ClientCall<StopRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runStop(call, note));
  }

  private async runStop(call: ClientCall<StopRequest>, note: AuditNote) {
    const s = call.session!;
    const args: StopArgs = { session: s.token, token: call.body.token };
    const r = await this.route(s.token, 'hb.stop', args, () => this.d.owner.stopHere(args));
    if (!r.stopped) throw new AppError('heartbeat_token_invalid');
    note.detail = `Heartbeat stopped after ${r.beats} beats`;
    await this.d.events.publish('heartbeat.stop', call.app.row.id, {
      user_id: r.userId,
      license_id: r.licenseId,
      beats: r.beats,
    });
    return { body: { success: true } };
  }
}
