// The realtime channel's connections on this worker, indexed the ways pushes address them (app, key,
// user, session) and counted per client IP (open and still upgrading) for the per-IP limit.
import type { CachedApp, ClientSession } from '../client/index.js';
import type { Socket } from '../../platform/http/sockets.js';
import type { ChannelKeys } from './client-channel.protocol.js';
import type { PushTarget } from './client-push.service.js';

export interface Conn {
  readonly id: string;
  readonly session: string;
  readonly key: string;
  /**
   * The session bound at the upgrade: its app, user, key and HWID (lower-cased; null or absent when
   * unknown) address pushes, and a beat on this connection needs no lookup of it (client-gate.ts).
   */
  readonly record: ClientSession;
  readonly ip: string;
  readonly clientKey: string;
  readonly version: string;
  /** The MAC keys until the connection opens; then they live in `slot` of the KeySlots (-1: none). */
  keys: ChannelKeys | null;
  slot: number;
  readonly openedAt: number;
  socket: Socket | null;
  hello: string | null;
  /** The app as it was at the upgrade, judged once the connection is open. */
  app: CachedApp | null;
  outSeq: number;
  inSeq: number;
  interval: number;
  /** No accepted beat by then: closed (4008). */
  deadline: number;
  /** The tail of the calls in flight; null while none is (most of a connection's life). */
  queue: Promise<void> | null;
  inflight: number;
  closed: boolean;
  /** The app version an update_required was pushed for. */
  updateNotified: string | null;
}

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  let s = m.get(k);
  if (!s) m.set(k, (s = new Set()));
  s.add(v);
}

function removeFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (s.size === 0) m.delete(k);
}

function bump(m: Map<string, number>, ip: string, by: number): void {
  const n = (m.get(ip) ?? 0) + by;
  if (n <= 0) m.delete(ip);
  else m.set(ip, n);
}

export class ChannelConns {
  readonly all = new Set<Conn>();
  private readonly byApp = new Map<string, Set<Conn>>();
  private readonly byLicense = new Map<string, Set<Conn>>();
  private readonly byUser = new Map<string, Set<Conn>>();
  private readonly bySession = new Map<string, Conn>();
  private readonly openPerIp = new Map<string, number>();
  private readonly pendingPerIp = new Map<string, number>();

  /** Connections of this IP, open or upgrading. */
  countFor(ip: string): number {
    return (this.openPerIp.get(ip) ?? 0) + (this.pendingPerIp.get(ip) ?? 0);
  }

  /** An upgrade of this IP began (1) or ended (-1). */
  upgrading(ip: string, by: 1 | -1): void {
    bump(this.pendingPerIp, ip, by);
  }

  /** Adds an opened connection; returns the session's older connection, which the caller ends. */
  add(c: Conn): Conn | undefined {
    this.all.add(c);
    bump(this.openPerIp, c.ip, 1);
    addTo(this.byApp, c.record.appId, c);
    if (c.record.licenseId) addTo(this.byLicense, c.record.licenseId, c);
    if (c.record.userId) addTo(this.byUser, c.record.userId, c);
    const older = this.bySession.get(c.key);
    this.bySession.set(c.key, c);
    return older;
  }

  remove(c: Conn): void {
    this.all.delete(c);
    bump(this.openPerIp, c.ip, -1);
    removeFrom(this.byApp, c.record.appId, c);
    if (c.record.licenseId) removeFrom(this.byLicense, c.record.licenseId, c);
    if (c.record.userId) removeFrom(this.byUser, c.record.userId, c);
    if (this.bySession.get(c.key) === c) this.bySession.delete(c.key);
  }

  hasApp(appId: string): boolean {
    return this.byApp.has(appId);
  }

  /** The app's connections now (a copy: ending one while iterating is safe). */
  ofApp(appId: string): Conn[] {
    return [...(this.byApp.get(appId) ?? [])];
  }

  ofSession(sessionKey: string): Conn | undefined {
    return this.bySession.get(sessionKey);
  }

  /** The connections a push is for. */
  targets(t: PushTarget): Conn[] {
    if ('sessionKey' in t) {
      const c = this.bySession.get(t.sessionKey);
      return c ? [c] : [];
    }
    const set =
      'licenseId' in t
        ? this.byLicense.get(t.licenseId)
        : 'userId' in t
          ? this.byUser.get(t.userId)
          : this.byApp.get(t.appId);
    const hwid = 'hwid' in t ? t.hwid : undefined;
    // A connection whose device is unknown may be on the removed one: it is revoked too.
    return [...(set ?? [])].filter(
      (c) => c.record.appId === t.appId && (hwid === undefined || !c.record.hwid || c.record.hwid === hwid),
    );
  }
}
