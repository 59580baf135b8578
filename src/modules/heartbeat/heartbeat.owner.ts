// The owner side of heartbeats (docs/spec.md heartbeat endpoints and state table, docs/protocol.md 6, 11.12-11.13):
// registered on the cluster node, it holds the actors of the sessions whose shard this worker
// leases, runs start, beat, stop and kill on them, and makes each outcome durable before it
// answers: with Redis, the session's new state is written under the shard lease's fencing number
// (a new owner after a failover continues from exactly that state); alone, it is marked for the
// restart checkpoint. Revocations from the event bus kill the sessions it owns.
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { HASHES } from '../../platform/cluster/names.js';
import { NotOwner, shardOf, type OpMap, type ShardNode } from '../../platform/cluster/cluster-node.js';
import type { AuditRepository } from '../audit/index.js';
import type { ClientSessions } from '../client/index.js';
import type { LiveEvent } from '../notify/index.js';
import { HeartbeatHost } from './heartbeat-host.js';
import type { ContextKey } from './heartbeat-passive.js';
import { decodeHeartbeat, encodeHeartbeat } from './heartbeat-codec.js';
import {
  hwidHash,
  type BeatInput,
  type BeatVerdict,
  type HeartbeatContext,
  type KillReason,
  type RejectReason,
} from './heartbeat.machine.js';
import type { SessionOverflow } from '../../platform/db/entities/index.js';
import { SeatKeeper } from './seats.js';

export const KILL_TEXT: Record<KillReason, string> = {
  system_id: 'system_id differs from start',
  no_code_hash: 'no code_hash on the first beat',
  code_changed: 'code_hash or code_size differs from the baseline',
  pinned_hash: 'code_hash differs from the pinned expected_binary_hash',
  drift: 'three drift warnings',
  debugger: 'debugger detected',
  revoked: 'license or user revoked',
  session_limit: 'session limit',
  expired: 'expired',
};
export const REJECT_TEXT: Record<RejectReason, string> = {
  token: 'wrong, stale or malformed token',
  replay: 'replayed beat_index',
};

// What crosses workers: plain data only (the operations are HeartbeatOps, below).
export interface StartArgs {
  session: string;
  appId: string;
  systemId: string;
  beatInterval: number;
  token: string;
  userId: string | null;
  licenseId: string | null;
  /**
   * hwidHash() of the HWID the client session was activated from; null when unknown. Absent when a
   * worker of an older build asks (a rolling upgrade): unknown too.
   */
  hwidHash?: string | null;
}
export interface BeatArgs {
  session: string;
  beat: BeatInput;
}
export interface StopArgs {
  session: string;
  token: string;
}
interface StopOutcome {
  stopped: boolean;
  beats: number;
  userId: string | null;
  licenseId: string | null;
}
interface BeatOutcome {
  verdict: BeatVerdict | null;
  token: string;
  beatCount: number;
  warnings: number;
  previousToken: string;
  userId: string | null;
  licenseId: string | null;
}

/** A start's claim of a seat of its key (docs/protocol.md 12.2); max 0: unlimited. */
export interface SeatClaimArgs {
  licenseId: string;
  session: string;
  max: number;
  overflow: SessionOverflow;
}
export interface SeatClaimOutcome {
  /** False when the session held its seat already. */
  added: boolean;
  /** Sessions ended to make room (kick_oldest). */
  kicked: { session: string; userId: string | null }[];
}
const NO_HEARTBEAT: BeatOutcome = Object.freeze({
  verdict: null,
  token: '',
  beatCount: 0,
  warnings: 0,
  previousToken: '',
  userId: null,
  licenseId: null,
});

/** Why the owner ends a session from outside a beat. */
type OuterKill = Extract<KillReason, 'revoked' | 'session_limit' | 'expired'>;

/** The operations other workers ask of this one, with their plain-data arguments and results. */
export interface HeartbeatOps extends OpMap {
  'hb.start': { args: StartArgs; result: { ok: true } };
  'hb.beat': { args: BeatArgs; result: BeatOutcome };
  'hb.stop': { args: StopArgs; result: StopOutcome };
  /** Ends one session as revoked (a revocation pushed on the realtime channel); how many ended. */
  'hb.kill': { args: { session: string; reason?: OuterKill }; result: number };
  /** Seats of a key, on the owner of the key's shard (seats.ts). */
  'seat.claim': { args: SeatClaimArgs; result: SeatClaimOutcome };
  'seat.release': { args: { licenseId: string; session: string }; result: boolean };
}

interface HeartbeatOwnerDeps {
  now: () => number;
  log: Logger;
  sessions: ClientSessions;
  audit: AuditRepository;
  coordinator: Coordinator;
  node: ShardNode<HeartbeatOps>;
  maxLiveActors?: number;
  /**
   * Without Redis: track changed sessions for the restart checkpoint (the owner is then its source
   * of kind `hb`, see platform/db/state-checkpoint.ts).
   */
  checkpointed?: boolean;
}

/** Where a shard's sessions are kept in Redis. */
const hashOf = HASHES.heartbeats;
/** How often the sessions whose last write failed are written again. */
const SETTLE_EVERY_MS = 500;

export class HeartbeatOwner {
  /** Sessions are grouped by shard in the host, so a released shard is dropped without a scan. */
  readonly host: HeartbeatHost;
  /** With Redis, state is written to it before a reply; alone, memory is all there is. */
  private readonly durable: boolean;
  /** Told of every session killed through this worker (the realtime channel ends its connection). */
  private readonly killListeners = new Set<(session: string) => void>();
  /** process_state.kind of the checkpointed sessions. */
  readonly checkpointKind = 'hb';
  /** Without Redis and with a checkpoint: sessions changed since the last one. */
  private changed: Set<string> | undefined;
  /** Floating seats: the keys whose shard this worker owns decide their starts here. */
  readonly seats: SeatKeeper;
  /**
   * With Redis: sessions whose last write failed without a clear answer (a timeout, a lost
   * connection). It may have been applied although the caller answered 503 and kept the state it
   * had, so the stored state can be a step ahead of this owner's: until this owner's own state is
   * written again, whoever loads the shard next could refuse the client's retry (or bring back a
   * session killed here). Written again every SETTLE_EVERY_MS until a write succeeds.
   */
  private readonly unsettled = new Set<string>();
  private settler: NodeJS.Timeout | undefined;
  private settling = false;

  constructor(private readonly d: HeartbeatOwnerDeps) {
    this.durable = d.coordinator.kind === 'redis';
    if (!this.durable && d.checkpointed) this.changed = new Set();
    this.host = new HeartbeatHost({
      now: d.now,
      maxLive: d.maxLiveActors ?? 10_000,
      groupOf: shardOf,
      onExpired: (c) => {
        // A lease lost a moment ago makes this write fail: the next owner's sweeper removes it.
        void this.persistQuietly(c.session, null);
        this.seats.releaseLater(c.licenseId, c.session);
        d.log.debug({ appId: c.appId }, 'heartbeat.expired');
      },
    });
    d.node.onShards({ acquired: (shard) => this.shardAcquired(shard), released: (shard) => this.shardReleased(shard) });
    d.node.handle('hb.start', (a) => this.startHere(a));
    d.node.handle('hb.beat', async (a) => this.beatHere(a));
    d.node.handle('hb.stop', (a) => this.stopHere(a));
    d.node.handle('hb.kill', (a) => this.killOwned(a.session, a.reason));
    this.seats = new SeatKeeper({
      now: d.now,
      log: d.log,
      coordinator: d.coordinator,
      node: d.node,
      stateOf: (session) => this.stateOf(session),
      kick: async (session) =>
        (await d.node.route(shardOf(session), 'hb.kill', { session, reason: 'session_limit' }, () =>
          this.killOwned(session, 'session_limit'),
        )) > 0,
    });
  }

  /** A session's current state: here when this worker hosts it, else (with Redis) as its owner wrote it. */
  async stateOf(session: string): Promise<HeartbeatContext | undefined> {
    const c = this.host.peek(session);
    if (c || !this.durable) return c;
    const raw = await this.d.coordinator.hashGet(hashOf(shardOf(session)), session);
    return raw ? decodeHeartbeat(raw) : undefined;
  }

  startSweeper(): void {
    this.host.startSweeper();
    if (this.durable && !this.settler) {
      this.settler = setInterval(() => void this.settle(), SETTLE_EVERY_MS);
      this.settler.unref();
    }
  }

  close(): void {
    clearInterval(this.settler);
    this.host.close();
  }

  /** Sessions waiting to be written again (tests, metrics). */
  get unsettledCount(): number {
    return this.unsettled.size;
  }

  /** Writes this owner's current state of every unsettled session (or its deletion, once gone). */
  async settle(): Promise<void> {
    if (this.settling || this.unsettled.size === 0) return;
    this.settling = true;
    let written = 0;
    try {
      await Promise.all(
        [...this.unsettled].map(async (session) => {
          try {
            await this.persist(session, this.host.peek(session) ?? null);
            written++;
          } catch (err) {
            if (err instanceof NotOwner) this.unsettled.delete(session);
          }
        }),
      );
    } finally {
      this.settling = false;
    }
    if (written > 0) this.d.log.info({ sessions: written, left: this.unsettled.size }, 'heartbeat.settled');
  }

  // ---- shard lifecycle (called by the cluster node) -------------------------------------------

  async shardAcquired(shard: number): Promise<void> {
    if (!this.durable) return;
    const now = this.d.now();
    for (const raw of (await this.d.coordinator.hashGetAll(hashOf(shard))).values()) {
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

  /**
   * Writes (or deletes) a session's state under the shard's fence; throws NotOwner when the lease is
   * gone. Without Redis it only marks the session for the checkpoint and returns nothing to wait for.
   */
  private persist(session: string, c: HeartbeatContext | null): Promise<void> | undefined {
    const shard = shardOf(session);
    const fence = this.d.node.fenceOf(shard);
    if (fence === undefined) throw new NotOwner(shard);
    if (!this.durable) {
      this.changed?.add(session);
      return undefined;
    }
    return this.write(session, shard, fence, c);
  }

  /** persist() for a removal nobody waits on: a lease lost meanwhile leaves it to the next owner's sweeper. */
  private async persistQuietly(session: string, c: HeartbeatContext | null): Promise<void> {
    try {
      await this.persist(session, c);
    } catch {
      // NotOwner or no answer: settle() or the next owner takes it from here
    }
  }

  private async write(session: string, shard: number, fence: number, c: HeartbeatContext | null): Promise<void> {
    let ok: boolean;
    try {
      ok = await this.d.coordinator.fencedHashSet(
        this.d.node.leaseName(shard),
        this.d.node.id,
        fence,
        hashOf(shard),
        session,
        c ? encodeHeartbeat(c) : null,
      );
    } catch (err) {
      this.unsettled.add(session); // no clear answer: written again by settle()
      throw err;
    }
    if (!ok) {
      // The node stops serving the shard too (dropping its sessions here through shardReleased), so
      // the call is routed afresh instead of finding this worker without the session.
      this.d.node.lost(shard, fence);
      throw new NotOwner(shard);
    }
    if (this.unsettled.size > 0) this.unsettled.delete(session);
  }

  // ---- operations, run on the shard's owner ---------------------------------------------------

  private owns(session: string): void {
    const shard = shardOf(session);
    if (this.d.node.fenceOf(shard) === undefined) throw new NotOwner(shard);
  }

  async startHere(a: StartArgs): Promise<{ ok: true }> {
    this.owns(a.session);
    const deadline = this.host.deadline(a.session);
    if (deadline !== undefined && deadline > this.d.now()) throw new AppError('heartbeat_exists');
    if (deadline !== undefined) this.host.remove(a.session);
    const c = this.host.create({ ...a, hwidHash: a.hwidHash ?? null, now: this.d.now() });
    try {
      await this.persist(a.session, c);
    } catch (err) {
      this.host.remove(a.session);
      throw err;
    }
    return { ok: true };
  }

  /**
   * A beat on this owner. Synchronous unless a write has to be waited for (with Redis): a beat
   * on a session this worker owns, alone, takes no promise from the frame to the answer.
   */
  beatHere(a: BeatArgs): BeatOutcome | Promise<BeatOutcome> {
    this.owns(a.session);
    // The sweeper runs every second; a beat past the deadline must not slip through in between.
    const deadline = this.host.deadline(a.session);
    if (deadline !== undefined && deadline <= this.d.now()) {
      this.host.remove(a.session);
      const gone = this.persist(a.session, null);
      if (gone) return gone.then(() => this.beatNow(a));
    }
    return this.beatNow(a);
  }

  private beatNow(a: BeatArgs): BeatOutcome | Promise<BeatOutcome> {
    const r = this.host.send(a.session, { type: 'BEAT', beat: a.beat });
    if (!r) return NO_HEARTBEAT;
    let written: Promise<void> | undefined;
    try {
      if (r.verdict.kind === 'accepted') written = this.persist(a.session, r.context);
      else if (r.verdict.kind === 'killed') written = this.persist(a.session, null);
    } catch (err) {
      this.undo(r, err);
    }
    if (written)
      return written.then(
        () => this.beatDone(a, r),
        (err: unknown) => this.undo(r, err),
      );
    return this.beatDone(a, r);
  }

  /**
   * A beat whose outcome could not be made durable did not happen: the session goes back to what it
   * was, and the client, answered 503, sends the same beat again (a moved shard was dropped whole
   * already). Rethrows.
   */
  private undo(r: NonNullable<ReturnType<HeartbeatHost['send']>>, err: unknown): never {
    if (!(err instanceof NotOwner)) this.host.restore(r.before);
    throw err;
  }

  private beatDone(a: BeatArgs, r: NonNullable<ReturnType<HeartbeatHost['send']>>): BeatOutcome {
    if (r.verdict.kind === 'killed') this.seats.releaseLater(r.before.licenseId, a.session);
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

  async stopHere(a: StopArgs): Promise<StopOutcome> {
    this.owns(a.session);
    const r = this.host.send(a.session, { type: 'STOP', token: a.token });
    if (!r || r.verdict.kind !== 'stopped') return { stopped: false, beats: 0, userId: null, licenseId: null };
    try {
      await this.persist(a.session, null);
    } catch (err) {
      if (!(err instanceof NotOwner)) this.host.restore(r.before);
      throw err;
    }
    this.seats.releaseLater(r.before.licenseId, a.session);
    return { stopped: true, beats: r.before.beatCount, userId: r.before.userId, licenseId: r.before.licenseId };
  }

  /**
   * Ends sessions from outside a beat: revoked, or their seat went to a newer start (then the
   * claim that asked has taken the seat away already).
   */
  async killHere(sessions: string[], reason: OuterKill = 'revoked'): Promise<number> {
    let n = 0;
    for (const session of sessions) {
      const r = this.host.send(session, { type: 'KILL', reason });
      if (!r) continue;
      await this.persistQuietly(session, null);
      if (reason !== 'session_limit') this.seats.releaseLater(r.before.licenseId, session);
      this.d.log.info({ appId: r.before.appId, reason: KILL_TEXT[reason] }, 'heartbeat.kill');
      this.d.audit.write({
        appId: r.before.appId,
        action: 'heartbeat.kill',
        level: 'warning',
        detail: `Session killed: ${KILL_TEXT[reason]}`,
      });
      const rec = await this.d.sessions.get(session);
      if (rec) await this.d.sessions.deactivate(session, rec);
      this.killed(session);
      n++;
    }
    return n;
  }

  /** Ends one session asked for by another worker (or a route to this one): NotOwner when its shard moved. */
  killOwned(session: string, reason: OuterKill = 'revoked'): Promise<number> {
    this.owns(session);
    return this.killHere([session], reason);
  }

  /** Tells the kill listeners (the gateway calls it for a session a beat killed). */
  killed(session: string): void {
    for (const l of this.killListeners) l(session);
  }

  /** Listens for sessions killed on this worker (by a beat or a revocation); returns the unsubscribe. */
  onKill(listener: (session: string) => void): () => void {
    this.killListeners.add(listener);
    return () => this.killListeners.delete(listener);
  }

  // ---- revocations (every worker gets every event; each acts on the sessions it owns) ---------

  /**
   * A deleted or banned key, or a banned user, kills the sessions bound to it, so the copy stops
   * at its next beat (docs/protocol.md 11.10). A deleted user's session is orphaned, not killed (docs/spec.md).
   * A removed device (docs/protocol.md 12.1, 14.3) kills the sessions of its key or user activated from
   * it; a customer's reset of every device, all of the key's.
   */
  onEvent(e: LiveEvent): void {
    const sessions = this.revokedBy(e);
    // docs/protocol.md 12.8: an expiry ends its sessions as a kill of its own reason.
    const reason = e.kind === 'license.expire' || e.kind === 'user.expire' ? 'expired' : 'revoked';
    if (sessions.length > 0)
      void this.killHere(sessions, reason).catch((err: unknown) =>
        this.d.log.error({ err }, 'heartbeat.revoke_failed'),
      );
  }

  /** The sessions on this worker an event ends. */
  private revokedBy(e: LiveEvent): string[] {
    const d = e.data;
    const where = (key: ContextKey, value: unknown) =>
      typeof value === 'string' ? this.host.sessionsWhere(key, value) : [];
    if (e.kind === 'app.delete') return where('appId', e.app_id);
    if (e.kind === 'license.delete' || e.kind === 'license.expire' || (e.kind === 'license.ban' && d.banned === true))
      return where('licenseId', d.license_id);
    if (e.kind === 'user.expire' || (e.kind === 'user.ban' && d.banned === true)) return where('userId', d.user_id);
    const removal =
      e.kind === 'license.device_remove' ||
      e.kind === 'user.device_remove' ||
      (e.kind === 'license.reset_hwid' && d.end_sessions === true);
    if (!removal) return [];
    const sessions = [...new Set([...where('licenseId', d.license_id), ...where('userId', d.user_id)])];
    // No hwid: every device of the key was removed.
    if (typeof d.hwid !== 'string') return sessions;
    const removed = hwidHash(d.hwid);
    // A session whose device is unknown (activated before devices were recorded on sessions) may be
    // on the removed device: it ends too, and its client authenticates again.
    return sessions.filter((s) => {
      const device = this.host.peek(s)?.hwidHash;
      return device === undefined || device === null || device === removed;
    });
  }

  /** Live sessions of a key on this worker (every one with one worker). */
  countForLicense(licenseId: string): number {
    return this.host.countWhere('licenseId', licenseId);
  }

  /** Live sessions of an app on this worker (the whole app with one worker). */
  countForApp(appId: string): number {
    return this.host.countWhere('appId', appId);
  }
}
