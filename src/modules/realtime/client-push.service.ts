// What the realtime client channel pushes, decided here and delivered by client-channel.ts:
// - revocations, from the same live events that end heartbeat sessions (every worker gets every
//   event and each pushes to the clients connected to it), from application changes (disabled,
//   deleted, an IP blacklisted) and from heartbeat kills wherever they happen;
// - `update_required` when force_update is on and the app's version differs from the client's;
// - `notice`: a text the dashboard sends to every live client of an application.
// Control messages between workers (a kill, a channel taking over a session, a notice) travel on
// one coordinator channel; session tokens never leave the worker, only their SHA-256.
import { CHANNELS, pack, unpack } from '../../platform/cluster/names.js';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from '../../platform/cluster/coordinator.js';
import type { AuditRepository } from '../audit/index.js';
import { sha256 } from '../../platform/crypto/index.js';
import type { AppsService } from '../apps/index.js';
import { refusalOf, type Admittee, type CachedApp, type ClientAppCache, type ClientSessions } from '../client/index.js';
import type { EventBus, LiveEvent } from '../notify/index.js';
import type { HeartbeatGateway, HeartbeatOwner } from '../heartbeat/index.js';
import { actorOf, appsPolicy, type Principal } from '../access/index.js';
import { normalizeHwid } from '../client/index.js';

export type RevokeReason =
  | 'license_banned'
  | 'license_deleted'
  | 'user_banned'
  | 'user_deleted'
  | 'hwid_reset'
  | 'app_disabled'
  | 'app_deleted'
  | 'blacklisted'
  | 'session_killed'
  | 'expired';

/**
 * Whose connections a push is for. With `hwid` (lower-cased), only those of the key or user whose
 * session was activated from that device (or whose device is unknown: activated before it was kept).
 */
export type PushTarget =
  | { appId: string }
  | { appId: string; licenseId: string; hwid?: string }
  | { appId: string; userId: string; hwid?: string }
  | { sessionKey: string };

export type Push =
  | { kind: 'revoke'; target: PushTarget; reason: RevokeReason }
  | { kind: 'notice'; appId: string; message: string; at: string }
  /** The app's settings changed: the channel re-judges its connections of that app with `appVerdict`. */
  | { kind: 'app_changed'; appId: string }
  /** Connection `conn` attached this session at `at` (ms): other connections of it opened before then end. */
  | { kind: 'supersede'; sessionKey: string; conn: string; at: number }
  /** This worker stops: every connection ends (the clients reconnect to another worker). */
  | { kind: 'shutdown' };

/** May return a promise for `shutdown` (calls in flight finish first); other pushes are synchronous. */
type PushListener = (p: Push) => void | Promise<void>;

const CHANNEL = CHANNELS.clientChannel;

type Control =
  | { t: 'kill'; s: string }
  | { t: 'attach'; s: string; c: string; at: number }
  | { t: 'notice'; a: string; m: string; at: string };

/** The key under which a session is known outside its connection (hex SHA-256 of the token). */
export function sessionKey(session: string): string {
  return sha256(session).toString('hex');
}

/** The revocations a live event means for connected clients (pure; the order of kinds is docs/spec.md's). */
function revocationsOf(e: LiveEvent): { target: PushTarget; reason: RevokeReason }[] {
  const d = e.data;
  const appId = e.app_id;
  const lic = typeof d.license_id === 'string' ? d.license_id : null;
  const user = typeof d.user_id === 'string' ? d.user_id : null;
  // A removal of one device names it; without it, every device of the key or user is meant.
  const device = typeof d.hwid === 'string' ? { hwid: normalizeHwid(d.hwid) } : {};
  const out: { target: PushTarget; reason: RevokeReason }[] = [];
  const add = (reason: RevokeReason, only: { hwid?: string } = {}) => {
    if (lic) out.push({ target: { appId, licenseId: lic, ...only }, reason });
    if (user) out.push({ target: { appId, userId: user, ...only }, reason });
  };
  switch (e.kind) {
    case 'license.ban':
      if (d.banned === true) add('license_banned');
      break;
    case 'license.delete':
      add('license_deleted');
      break;
    case 'license.reset_hwid':
    case 'user.reset_hwid':
      add('hwid_reset', device);
      break;
    case 'license.device_remove':
    case 'user.device_remove':
      if ('hwid' in device) add('hwid_reset', device);
      break;
    case 'license.expire':
      // docs/protocol.md 12.8: the key reached expires_at; `user.expire` below is an end user's own expiry.
      add('expired');
      break;
    case 'user.expire':
      if (user) out.push({ target: { appId, userId: user }, reason: 'expired' });
      break;
    case 'user.ban':
      if (d.banned === true && user) out.push({ target: { appId, userId: user }, reason: 'user_banned' });
      break;
    case 'user.delete':
      // The key stays and can be registered again: only the user's own sessions end.
      if (user) out.push({ target: { appId, userId: user }, reason: 'user_deleted' });
      break;
    case 'app.delete':
      out.push({ target: { appId }, reason: 'app_deleted' });
      break;
    default:
      break;
  }
  return out;
}

/** What an application's current settings mean for one connected client. */
type AppVerdict =
  | { kind: 'ok' }
  | { kind: 'revoke'; reason: RevokeReason; detail?: string }
  | {
      kind: 'update_required';
      version: string;
      detail: { message: string; latest_version: string; update_url: string; force_update: true };
    };

/** The client gate's admission (client/admission.ts) first, then the app's version. */
export function appVerdict(app: CachedApp | null, client: Admittee & { version: string }): AppVerdict {
  if (!app) return { kind: 'revoke', reason: 'app_deleted' };
  const refusal = refusalOf(app, client);
  if (refusal) return { kind: 'revoke', reason: refusal };
  if (app.row.force_update && client.version !== app.row.version) {
    return {
      kind: 'update_required',
      version: app.row.version,
      detail: {
        message: app.row.update_message || 'A new version is required.',
        latest_version: app.row.version,
        update_url: app.row.update_url,
        force_update: true,
      },
    };
  }
  return { kind: 'ok' };
}

interface ClientPushDeps {
  log: Logger;
  now: () => number;
  coordinator: Coordinator;
  events: EventBus;
  appCache: ClientAppCache;
  sessions: ClientSessions;
  /** Ends a session as revoked on its owner. */
  heartbeats: Pick<HeartbeatGateway, 'revoke'>;
  /** Tells of sessions killed on this worker. */
  owner: Pick<HeartbeatOwner, 'onKill'>;
  apps: Pick<AppsService, 'visible'>;
  audit: AuditRepository;
}

export class ClientPushService {
  private readonly listeners = new Set<PushListener>();
  private readonly offs: (() => void)[] = [];
  private unsubscribe: Unsubscribe | undefined;

  constructor(private readonly d: ClientPushDeps) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.d.coordinator.subscribe(CHANNEL, (raw) => this.control(raw));
    this.offs.push(
      this.d.events.on((e) => {
        for (const r of revocationsOf(e)) this.emit({ kind: 'revoke', ...r });
      }),
      this.d.appCache.onChange((appId) => this.emit({ kind: 'app_changed', appId })),
      // A kill anywhere (a REST beat, a revocation on the session's owner) ends the session's channel.
      this.d.owner.onKill((session) => this.publish({ t: 'kill', s: sessionKey(session) })),
    );
  }

  /** Ends every connection of this worker first (after their calls in flight), then stops listening. */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.listeners].map(async (l) => l({ kind: 'shutdown' })));
    for (const off of this.offs.splice(0)) off();
    await this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  listen(l: PushListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** The application as a client call would see it now (cached for at most 2 s, dropped on change). */
  app(appId: string): Promise<CachedApp | null> {
    return this.d.appCache.getById(appId);
  }

  /** A channel took over `session` here at `at`: older connections of it, on any worker, end. */
  attached(session: string, conn: string, at: number): void {
    this.publish({ t: 'attach', s: sessionKey(session), c: conn, at });
  }

  /**
   * After a pushed revocation: the heartbeat session ends wherever it lives (audited as a kill)
   * and the client session loses its activation, so only a new authentication continues.
   */
  async endSession(session: string, reason: 'revoked' | 'expired' = 'revoked'): Promise<void> {
    await this.d.heartbeats.revoke(session, reason);
    const rec = await this.d.sessions.get(session);
    if (rec && rec.activatedAt !== null) await this.d.sessions.deactivate(session, rec);
  }

  /** POST /api/apps/{id}/notice: every live client of the app gets `message`, on every worker. */
  async notice(p: Principal, appId: string, message: string): Promise<void> {
    appsPolicy.assertNotice(p);
    await this.d.apps.visible(p, appId);
    const at = new Date(this.d.now()).toISOString();
    await this.d.coordinator.publish(CHANNEL, pack({ t: 'notice', a: appId, m: message, at } satisfies Control));
    this.d.audit.write({
      appId,
      action: 'app.notice',
      detail: `Notice sent to live clients (${message.length} characters)`,
      actor: actorOf(p),
    });
  }

  private publish(c: Control): void {
    this.d.coordinator
      .publish(CHANNEL, pack(c))
      .catch((err: unknown) => this.d.log.warn({ err, t: c.t }, 'channel.control_publish_failed'));
  }

  private control(raw: Buffer): void {
    let c: Control;
    try {
      c = unpack(raw) as Control;
    } catch (err) {
      this.d.log.warn({ err }, 'channel.bad_control_frame');
      return;
    }
    if (c.t === 'kill') this.emit({ kind: 'revoke', target: { sessionKey: c.s }, reason: 'session_killed' });
    else if (c.t === 'attach') this.emit({ kind: 'supersede', sessionKey: c.s, conn: c.c, at: c.at });
    else if (c.t === 'notice') this.emit({ kind: 'notice', appId: c.a, message: c.m, at: c.at });
  }

  private emit(p: Push): void {
    for (const l of this.listeners) {
      try {
        l(p);
      } catch (err) {
        this.d.log.error({ err, kind: p.kind }, 'channel.push_listener_failed');
      }
    }
  }
}
