// Heartbeat protocol (SPEC heartbeat endpoints and state table, PROTOCOL 6, 11.12-11.13) on top
// of the actor host, sharded over the cluster: a session lives on the worker owning
// shardOf(session). The worker that received the request runs the gate; the operation runs on
// the owner (here, or through a call), and with Redis the owner writes the session's new state
// under its lease's fencing number before answering, so a beat is acknowledged only once it is
// durable and a new owner after a failover continues from exactly that state.
// Kills and refusals are audited; kills deactivate the client session.
import type { Logger } from 'pino';
import { AppError, ValidationError } from '../../errors.js';
import { HeartbeatRefusals } from './heartbeat-refusals.js';
import { hmacSha256, randomHex } from '../../platform/crypto/index.js';
import { outcome, type AuditNote, type ClientCall, type ClientOutcome } from '../client/client-call.js';
import type { BeatRequest, StartRequest, StopRequest } from '../client/client-requests.js';
import { HeartbeatHost } from './heartbeat-host.js';
import type { ContextKey } from './heartbeat-passive.js';
import { decodeHeartbeat, encodeHeartbeat } from './heartbeat-codec.js';
import type { BeatInput, BeatVerdict, HeartbeatContext, KillReason, RejectReason } from './heartbeat.machine.js';
import type { AuditRepository } from '../audit/audit.repository.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { NotOwner, shardOf, type ClusterNode } from '../../platform/cluster/cluster-node.js';
import type { ClientSessions } from '../client/client-sessions.js';
import { beatInterval } from '../apps/apps.service.js';
import type { EventBus, LiveEvent } from '../notify/events.js';
import type { ClusterOps } from '../../cluster-ops.js';

const KILL_TEXT: Record<KillReason, string> = {
  system_id: 'system_id differs from start',
  no_code_hash: 'no code_hash on the first beat',
  code_changed: 'code_hash or code_size differs from the baseline',
  pinned_hash: 'code_hash differs from the pinned expected_binary_hash',
  drift: 'three drift warnings',
  debugger: 'debugger detected',
  revoked: 'license or user revoked',
};
const REJECT_TEXT: Record<RejectReason, string> = {
  token: 'wrong, stale or malformed token',
  replay: 'replayed beat_index',
};

export function newHeartbeatToken(): string {
  return `TT${randomHex(16)}`;
}

export function startProof(session: string, systemId: string, token: string): string {
  return hmacSha256(session, `kwhs1\n${systemId}\n${token}`).toString('base64');
}

export function beatProof(
  previousToken: string,
  session: string,
  beatIndex: number,
  newToken: string,
  beatCount: number,
): string {
  return hmacSha256(previousToken, `kwhb1\n${session}\n${beatIndex}\n${newToken}\n${beatCount}`).toString('base64');
}

export interface HeartbeatServiceDeps {
  now: () => number;
  log: Logger;
  sessions: ClientSessions;
  audit: AuditRepository;
  events: EventBus;
  coordinator: Coordinator;
  node: ClusterNode<ClusterOps>;
  maxLiveActors?: number;
  /**
   * Without Redis: track changed sessions for the restart checkpoint (this service is then its source
   * of kind `hb`, see state-checkpoint.ts).
   */
  checkpointed?: boolean;
}

// What crosses workers: plain data only (the operations are declared in cluster-ops.ts).
export interface StartArgs {
  session: string;
  appId: string;
  systemId: string;
  beatInterval: number;
  token: string;
  userId: string | null;
  licenseId: string | null;
}
export interface BeatArgs {
  session: string;
  beat: BeatInput;
}
export interface StopArgs {
  session: string;
  token: string;
}
export interface StopOutcome {
  stopped: boolean;
  beats: number;
  userId: string | null;
  licenseId: string | null;
}
export interface BeatOutcome {
  verdict: BeatVerdict | null;
  token: string;
  beatCount: number;
  warnings: number;
  previousToken: string;
  userId: string | null;
  licenseId: string | null;
}

const hashOf = (shard: number) => `hbs:${shard}`;

export class HeartbeatService {
  /** Sessions are grouped by shard in the host, so a released shard is dropped without a scan. */
  readonly host: HeartbeatHost;
  /** With Redis, state is written to it before a reply; alone, memory is all there is. */
  private readonly durable: boolean;
  /** Told of every session killed through this worker (the realtime channel ends its connection). */
  private readonly killListeners = new Set<(session: string) => void>();
  /** The refusal budget of sessions and addresses. */
  readonly refusals: HeartbeatRefusals;
  /** process_state.kind of the checkpointed sessions. */
  readonly checkpointKind = 'hb';
  /** Without Redis and with a checkpoint: sessions changed since the last one. */
  private changed: Set<string> | undefined;

  constructor(private readonly d: HeartbeatServiceDeps) {
    this.durable = d.coordinator.kind === 'redis';
    this.refusals = new HeartbeatRefusals(d.coordinator);
    if (!this.durable && d.checkpointed) this.changed = new Set();
    this.host = new HeartbeatHost({
      now: d.now,
      maxLive: d.maxLiveActors ?? 10_000,
      groupOf: shardOf,
      onExpired: (c) => {
        // A lease lost a moment ago makes this write fail: the next owner's sweeper removes it.
        void this.persist(c.session, null).catch(() => undefined);
        d.log.debug({ appId: c.appId }, 'heartbeat.expired');
      },
    });
    d.node.onShards({ acquired: (shard) => this.shardAcquired(shard), released: (shard) => this.shardReleased(shard) });
    d.node.handle('hb.start', (a) => this.startHere(a));
    d.node.handle('hb.beat', (a) => this.beatHere(a));
    d.node.handle('hb.stop', (a) => this.stopHere(a));
    d.node.handle('hb.kill', (a) => this.killHere([a.session]));
  }

  startSweeper(): void {
    this.host.startSweeper();
  }

  close(): void {
    this.host.close();
  }

  // ---- shard lifecycle (called by the cluster node) -------------------------------------------

  async shardAcquired(shard: number): Promise<void> {
    if (!this.durable) return;
    const now = this.d.now();
    for (const [session, raw] of await this.d.coordinator.hashGetAll(hashOf(shard))) {
      let c: HeartbeatContext;
      try {
        c = decodeHeartbeat(raw);
      } catch (err) {
        // Written by a build that knows a newer format (a rolling upgrade): leave it to such a worker.
        this.d.log.error({ err, shard }, 'heartbeat.restore_refused');
        continue;
      }
      if (c.expiresAt <= now) continue; // evicted by the sweeper of whoever owns it next
      this.host.restore(c);
    }
  }

  shardReleased(shard: number): void {
    this.host.removeGroup(shard);
  }

  // ---- the restart checkpoint of a single process (state-checkpoint.ts) ----------------------

  /** Sessions changed since the last call: their current state, or a deletion. */
  takeChanges(): { upserts: { key: string; value: Buffer; expiresAt: number }[]; deletes: string[] } {
    const upserts: { key: string; value: Buffer; expiresAt: number }[] = [];
    const deletes: string[] = [];
    if (!this.changed) return { upserts, deletes };
    const sessions = this.changed;
    this.changed = new Set();
    const now = this.d.now();
    for (const session of sessions) {
      const c = this.host.peek(session);
      if (c && c.expiresAt > now) upserts.push({ key: session, value: encodeHeartbeat(c), expiresAt: c.expiresAt });
      else deletes.push(session);
    }
    return { upserts, deletes };
  }

  unsaved(sessions: readonly string[]): void {
    for (const s of sessions) this.changed?.add(s);
  }

  restore(entries: readonly { key: string; value: Buffer }[]): void {
    const now = this.d.now();
    for (const e of entries) {
      let c: HeartbeatContext;
      try {
        c = decodeHeartbeat(e.value);
      } catch (err) {
        this.d.log.error({ err }, 'heartbeat.restore_refused');
        continue;
      }
      if (c.expiresAt > now && !this.host.has(c.session)) this.host.restore(c);
    }
  }

  /** Writes (or deletes) a session's state under the shard's fence; throws NotOwner when the lease is gone. */
  private async persist(session: string, c: HeartbeatContext | null): Promise<void> {
    const shard = shardOf(session);
    const fence = this.d.node.fenceOf(shard);
    if (fence === undefined) throw new NotOwner(shard);
    if (!this.durable) {
      this.changed?.add(session);
      return;
    }
    const ok = await this.d.coordinator.fencedHashSet(
      this.d.node.leaseName(shard),
      this.d.node.id,
      fence,
      hashOf(shard),
      session,
      c ? encodeHeartbeat(c) : null,
    );
    if (!ok) {
      this.shardReleased(shard);
      throw new NotOwner(shard);
    }
  }

  // ---- operations, run on the shard's owner ---------------------------------------------------

  private owns(session: string): void {
    const shard = shardOf(session);
    if (this.d.node.fenceOf(shard) === undefined) throw new NotOwner(shard);
  }

  private async startHere(a: StartArgs): Promise<{ ok: true }> {
    this.owns(a.session);
    const deadline = this.host.deadline(a.session);
    if (deadline !== undefined && deadline > this.d.now()) throw new AppError('heartbeat_exists');
    if (deadline !== undefined) this.host.remove(a.session);
    const c = this.host.create({ ...a, now: this.d.now() });
    try {
      await this.persist(a.session, c);
    } catch (err) {
      this.host.remove(a.session);
      throw err;
    }
    return { ok: true };
  }

  private async beatHere(a: BeatArgs): Promise<BeatOutcome> {
    this.owns(a.session);
    // The sweeper runs every second; a beat past the deadline must not slip through in between.
    const deadline = this.host.deadline(a.session);
    if (deadline !== undefined && deadline <= this.d.now()) {
      this.host.remove(a.session);
      await this.persist(a.session, null);
    }
    const r = this.host.send(a.session, { type: 'BEAT', beat: a.beat });
    if (!r)
      return { verdict: null, token: '', beatCount: 0, warnings: 0, previousToken: '', userId: null, licenseId: null };
    if (r.verdict.kind === 'accepted') await this.persist(a.session, r.context);
    else if (r.verdict.kind === 'killed') await this.persist(a.session, null);
    return {
      verdict: r.verdict,
      token: r.context?.token ?? '',
      beatCount: r.context?.beatCount ?? 0,
      warnings: r.context?.warnings ?? 0,
      previousToken: r.before.token,
      userId: r.before.userId,
      licenseId: r.before.licenseId,
    };
  }

  private async stopHere(a: StopArgs): Promise<StopOutcome> {
    this.owns(a.session);
    const r = this.host.send(a.session, { type: 'STOP', token: a.token });
    if (!r || r.verdict.kind !== 'stopped') return { stopped: false, beats: 0, userId: null, licenseId: null };
    await this.persist(a.session, null);
    return { stopped: true, beats: r.before.beatCount, userId: r.before.userId, licenseId: r.before.licenseId };
  }

  private async killHere(sessions: string[]): Promise<number> {
    let n = 0;
    for (const session of sessions) {
      const r = this.host.send(session, { type: 'KILL', reason: 'revoked' });
      if (!r) continue;
      await this.persist(session, null).catch(() => undefined);
      this.d.audit.write({
        appId: r.before.appId,
        action: 'heartbeat.kill',
        level: 'warning',
        detail: `Session killed: ${KILL_TEXT.revoked}`,
      });
      const rec = await this.d.sessions.get(session);
      if (rec) await this.d.sessions.deactivate(session, rec);
      this.killed(session);
      n++;
    }
    return n;
  }

  private killed(session: string): void {
    for (const l of this.killListeners) l(session);
  }

  /** Listens for sessions killed on this worker (by a beat or a revocation); returns the unsubscribe. */
  onKill(listener: (session: string) => void): () => void {
    this.killListeners.add(listener);
    return () => this.killListeners.delete(listener);
  }

  /** Kills one session as revoked, on whichever worker owns it; false when it had none. */
  async revoke(session: string): Promise<boolean> {
    return (await this.route(session, 'hb.kill', { session }, () => this.killHere([session]))) > 0;
  }

  private route<K extends keyof ClusterOps & string>(
    session: string,
    op: K,
    args: ClusterOps[K]['args'],
    here: () => Promise<ClusterOps[K]['result']>,
  ) {
    return this.d.node.route(shardOf(session), op, args, here);
  }

  // ---- the endpoints --------------------------------------------------------------------------

  /** SPEC "Session alive": a session with zero beats is alive; else the last beat is at most 3 intervals old. */
  async isAlive(session: string): Promise<boolean> {
    let c: HeartbeatContext | undefined = this.host.peek(session);
    if (!c && this.durable) {
      const raw = await this.d.coordinator.hashGet(hashOf(shardOf(session)), session);
      c = raw ? decodeHeartbeat(raw) : undefined;
    }
    const now = this.d.now();
    if (!c || c.expiresAt <= now) return false;
    return c.beatCount === 0 || now - c.lastBeatAt <= c.beatInterval * 3 * 1000;
  }

  start(call: ClientCall<StartRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.budgeted(call, note, () => this.runStart(call, note)));
  }

  /**
   * Runs a start or a beat within the session's and the IP's refusal budget (PROTOCOL 11.26): over
   * it, 429 before any work; a refusal is counted and audited at most once a minute per session.
   */
  private async budgeted<T>(call: ClientCall<unknown>, note: AuditNote, run: () => Promise<T>): Promise<T> {
    const session = call.session!.token;
    try {
      await this.refusals.check(session, call.ip);
      return await run();
    } catch (err) {
      if (err instanceof AppError || err instanceof ValidationError) {
        if (!(await this.refusals.refused(session, call.ip))) note.skip = true;
      }
      throw err;
    }
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
    };
    await this.route(s.token, 'hb.start', args, () => this.startHere(args));
    note.detail = `Heartbeat started (interval ${interval}s)`;
    return {
      body: { success: true, token, beat_interval: interval, proof: startProof(s.token, call.body.system_id, token) },
    };
  }

  beat(call: ClientCall<BeatRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.budgeted(call, note, () => this.runBeat(call, note)));
  }

  private async runBeat(call: ClientCall<BeatRequest>, note: AuditNote) {
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
    const r = await this.route(s.token, 'hb.beat', args, () => this.beatHere(args));
    const v = r.verdict;
    if (!v) {
      note.detail = '403 beat refused: no live heartbeat session';
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'rejected') {
      note.detail = `403 beat refused: ${REJECT_TEXT[v.reason]}`;
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'killed') {
      note.action = 'heartbeat.kill';
      note.detail = `Session killed: ${KILL_TEXT[v.reason]}`;
      const current = await this.d.sessions.get(s.token);
      if (current) await this.d.sessions.deactivate(s.token, current);
      this.killed(s.token);
      await this.d.events.publish('heartbeat.kill', call.app.row.id, {
        reason: v.reason,
        ip: call.ip,
        user_id: r.userId,
        license_id: r.licenseId,
      });
      throw new AppError('heartbeat_rejected');
    }
    if (v.kind === 'accepted' && v.drift) {
      note.level = 'warning';
      note.detail = `Beat ${b.beat_index} late: drift warning ${r.warnings} of 3`;
    } else {
      // Accepted beats are counted in metrics, not written one by one to the audit log.
      note.skip = true;
    }
    return {
      body: {
        success: true,
        new_token: r.token,
        beat_count: r.beatCount,
        proof: beatProof(r.previousToken, s.token, b.beat_index, r.token, r.beatCount),
      },
    };
  }

  stop(call: ClientCall<StopRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runStop(call, note));
  }

  private async runStop(call: ClientCall<StopRequest>, note: AuditNote) {
    const s = call.session!;
    const args: StopArgs = { session: s.token, token: call.body.token };
    const r = await this.route(s.token, 'hb.stop', args, () => this.stopHere(args));
    if (!r.stopped) throw new AppError('heartbeat_token_invalid');
    note.detail = `Heartbeat stopped after ${r.beats} beats`;
    await this.d.events.publish('heartbeat.stop', call.app.row.id, {
      user_id: r.userId,
      license_id: r.licenseId,
      beats: r.beats,
    });
    return { body: { success: true } };
  }

  // ---- revocations (every worker gets every event; each acts on the sessions it owns) ---------

  /**
   * A deleted or banned key, or a banned user, kills the sessions bound to it, so the copy stops
   * at its next beat (PROTOCOL 11.10). A deleted user's session is orphaned, not killed (SPEC).
   */
  onEvent(e: LiveEvent): void {
    const d = e.data;
    let match: [ContextKey, unknown] | undefined;
    if (e.kind === 'app.delete') match = ['appId', e.app_id];
    else if (e.kind === 'license.delete' || (e.kind === 'license.ban' && d.banned === true))
      match = ['licenseId', d.license_id];
    else if (e.kind === 'user.ban' && d.banned === true) match = ['userId', d.user_id];
    if (!match || typeof match[1] !== 'string') return;
    const sessions = this.host.sessionsWhere(match[0], match[1]);
    if (sessions.length > 0)
      void this.killHere(sessions).catch((err: unknown) => this.d.log.error({ err }, 'heartbeat.revoke_failed'));
  }

  /** Live sessions of an app on this worker (the whole app with one worker). */
  countForApp(appId: string): number {
    return this.host.countWhere('appId', appId);
  }
}
