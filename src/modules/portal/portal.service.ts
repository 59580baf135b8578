// The customer portal (docs/protocol.md 14.1-14.3): a buyer signs in with a license-only key or an end user's
// name and password, sees its own license and devices (nothing of other customers, resellers, IPs or
// geo), resets its devices with a cooldown, and changes its password. Sign-in failures count towards
// the client lockouts (the same counters as /api/client/login), so the portal is no side door for
// guessing keys or passwords.
import { AppError, validationError } from '../../errors.js';
import {
  burnPasswordCheck,
  hashPassword,
  randomToken,
  sha256Hex,
  verifyPassword,
} from '../../platform/crypto/index.js';
import { toDate } from '../../platform/db/sql.js';
import type { Attempt, Lockout } from '../../platform/limits/lockout.js';
import type { ActivationService } from '../activation/index.js';
import type { CustomerRepository, DeviceRepository, EndUserRow, LicenseRow } from '../keys/index.js';
import type { ApplicationRepository, PortalApp } from '../apps/index.js';
import type { AuditRepository } from '../audit/index.js';
import { computedStatus, licenseHash } from '../keys/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import type { PortalRepository, PortalSessionRow } from './portal.repository.js';
import { normalizeHwid } from '../client/index.js';

export const PORTAL_SESSION_TTL_MS = 86_400_000;
const MAX_PASSWORD_BYTES = 72;
const HOUR_MS = 3_600_000;

interface PortalDeps {
  repo: PortalRepository;
  /** The customer's key and end user (the keys module). */
  customers: Pick<CustomerRepository, 'licenseByHash' | 'license' | 'userByName' | 'user' | 'setPassword'>;
  /** The application as the portal reads it (the apps module). */
  apps: Pick<ApplicationRepository, 'portalAppByApiKey' | 'portalAppById'>;
  /** The client lockouts (docs/protocol.md 2): the very counters /api/client/login and register fail into. */
  lockout: Lockout;
  audit: AuditRepository;
  events: EventBus;
  licenseHashKey: Buffer;
  /** Live heartbeat sessions of a key (its seats, counted on the key's shard owner). */
  liveSessions: (licenseId: string) => Promise<number>;
  /** The devices of keys and end users (docs/protocol.md 12.1). */
  devices: Pick<DeviceRepository, 'of' | 'remove'>;
  /** Offline license files (docs/protocol.md 12.5), signed as the client's are. */
  offline: Pick<ActivationService, 'offlineFileFor'>;
  /** The vendor's alert webhook: a customer's reset reaches it as it happens. */
  webhooks: Pick<WebhookService, 'notify'>;
  now: () => number;
}

export type PortalLogin =
  | { api_key: string; license: string; username?: undefined; password?: undefined }
  | { api_key: string; username: string; password: string; license?: undefined };

const iso = (v: Date | string | null | undefined) => toDate(v)?.toISOString() ?? null;

function assertPasswordBytes(password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES)
    throw validationError('password', `Password must be at most ${MAX_PASSWORD_BYTES} UTF-8 bytes`, 'string_too_long');
}

export class PortalService {
  /** The client lockouts (docs/protocol.md 2): the very counters /api/client/login fails into. */
  private readonly lockout: Lockout;

  private purge: NodeJS.Timeout | undefined;

  constructor(private readonly d: PortalDeps) {
    this.lockout = d.lockout;
  }

  /** Expired sign-ins are never accepted; this only keeps their table small. */
  start(): void {
    this.purge = setInterval(() => {
      this.d.repo.purgeSessions(new Date(this.d.now())).catch(() => undefined);
    }, HOUR_MS).unref();
  }

  stop(): void {
    clearInterval(this.purge);
  }

  async login(input: PortalLogin, ip: string): Promise<{ token: string }> {
    const app = await this.d.apps.portalAppByApiKey(input.api_key);
    if (!app) throw new AppError('app_not_found');
    if (!app.portal_enabled) throw new AppError('portal_disabled');
    const byUser = input.license === undefined;
    const username = byUser ? input.username.normalize('NFC') : '';
    const lockKeys = [`${app.id}:ip:${ip}`, ...(byUser ? [`${app.id}:u:${username.toLowerCase()}`] : [])];
    // docs/protocol.md 11.31: the attempt is reserved before the credentials are checked.
    return this.lockout.attempt(lockKeys, (attempt) => this.signIn(app, input, ip, username, attempt));
  }

  private async signIn(
    app: PortalApp,
    input: PortalLogin,
    ip: string,
    username: string,
    attempt: Attempt,
  ): Promise<{ token: string }> {
    let session: PortalSessionRow | null = null;
    let who = '';
    if (input.license !== undefined) {
      const key = await this.d.customers.licenseByHash(app.id, licenseHash(this.d.licenseHashKey, input.license));
      // A key bound to an end user signs in with that user's name and password, never alone.
      if (key && key.status !== 'banned' && key.user_id === null && key.used_by === 'license-only')
        session = { app_id: app.id, license_id: key.id, user_id: null };
      else if (key && key.status === 'unused') session = { app_id: app.id, license_id: key.id, user_id: null };
      who = `key ${key?.key_preview ?? 'unknown'}`;
    } else {
      const user =
        Buffer.byteLength(input.password, 'utf8') <= MAX_PASSWORD_BYTES
          ? await this.d.customers.userByName(app.id, username)
          : undefined;
      // Unknown names cost the same Argon2id work as a wrong password, so names don't leak.
      const ok = user
        ? await verifyPassword(user.password_hash, input.password)
        : await burnPasswordCheck(input.password);
      const key = ok && user?.license_id ? await this.d.customers.license(user.license_id) : undefined;
      if (ok && user && !user.banned && key && key.status !== 'banned')
        session = { app_id: app.id, license_id: key.id, user_id: user.id };
      who = `user ${username}`;
    }
    if (!session) {
      attempt.fail();
      this.d.audit.write({
        appId: app.id,
        action: 'portal.login_failed',
        detail: `Portal sign-in of ${who} failed`,
        ip,
        level: 'warning',
      });
      throw new AppError('portal_credentials_invalid');
    }
    const token = randomToken(32);
    const now = this.d.now();
    await this.d.repo.createSession(sha256Hex(token), session, new Date(now), new Date(now + PORTAL_SESSION_TTL_MS));
    this.d.audit.write({ appId: app.id, action: 'portal.login', detail: `Portal sign-in of ${who}`, ip });
    return { token };
  }

  /** The customer a portal token names, or null (unknown, expired, or its key deleted). */
  authenticate(token: string): Promise<PortalSessionRow | undefined> {
    return this.d.repo.session(sha256Hex(token), new Date(this.d.now()));
  }

  logout(token: string): Promise<void> {
    return this.d.repo.deleteSession(sha256Hex(token));
  }

  private async customer(s: PortalSessionRow): Promise<{ key: LicenseRow; user: EndUserRow | null }> {
    const key = await this.d.customers.license(s.license_id);
    const user = s.user_id ? ((await this.d.customers.user(s.user_id)) ?? null) : null;
    if (!key || (s.user_id && (!user || user.license_id !== key.id))) throw new AppError('not_authenticated');
    return { key, user };
  }

  /**
   * docs/protocol.md 11.34: a portal session follows its key. Reading (`me`) still shows a banned, expired or
   * paused key; every write answers docs/spec.md's license error for that state, in the order `license`
   * checks them.
   */
  private async writer(s: PortalSessionRow): Promise<{ key: LicenseRow; user: EndUserRow | null; app: PortalApp }> {
    const { key, user } = await this.customer(s);
    const app = await this.d.apps.portalAppById(s.app_id);
    if (!app) throw new AppError('not_authenticated');
    if (app.keys_paused) throw new AppError('license_paused');
    if (key.status === 'banned') throw new AppError('license_banned');
    if (computedStatus(key, this.d.now()) === 'expired') throw new AppError('license_expired');
    return { key, user, app };
  }

  private async nextResetAt(licenseId: string, cooldownHours: number): Promise<Date | null> {
    const last = await this.d.repo.lastReset(licenseId);
    if (!last || cooldownHours === 0) return null;
    const next = toDate(last.reset_at)!.getTime() + cooldownHours * HOUR_MS;
    return next > this.d.now() ? new Date(next) : null;
  }

  /** The customer's devices, oldest first: its end user's when it signs in by name, else its key's. */
  private async devices(key: LicenseRow, user: EndUserRow | null) {
    const [kind, id] = user ? (['user', user.id] as const) : (['key', key.id] as const);
    return (await this.d.devices.of(kind, [id])).get(id) ?? [];
  }

  async me(s: PortalSessionRow) {
    const { key, user } = await this.customer(s);
    const app = await this.d.apps.portalAppById(s.app_id);
    if (!app) throw new AppError('not_authenticated');
    const next = await this.nextResetAt(key.id, app.portal_reset_cooldown_hours);
    return {
      // offline_days (docs/protocol.md 12.5): 0 = offline files are off; the page offers the download only when on.
      app: { name: app.name, offline_days: app.offline_days },
      license: {
        key_preview: key.key_preview,
        computed_status: computedStatus(key, this.d.now()),
        level: key.level,
        expires_at: key.duration_days === 0 ? null : iso(key.expires_at),
        entitlements: [...(key.entitlements ?? [])].sort(),
        devices: await this.devices(key, user),
        max_devices: key.max_devices ?? app.max_devices,
        live_sessions: await this.d.liveSessions(key.id),
      },
      user: user
        ? { username: user.username, created_at: iso(user.created_at), last_login: iso(user.last_login) }
        : null,
      next_reset_at: next?.toISOString() ?? null,
    };
  }

  /**
   * Clears one device or all, ends the live sessions of the removed devices on every worker (one
   * device: only the sessions activated from it), starts the cooldown.
   */
  async resetDevices(s: PortalSessionRow, hwid: string | undefined, ip: string) {
    const { key, user, app } = await this.writer(s);
    const held = (await this.devices(key, user)).map((d) => d.hwid);
    const one = hwid === undefined ? undefined : held.find((h) => h === hwid || h === normalizeHwid(hwid));
    if (hwid !== undefined && one === undefined) throw new AppError('device_not_found');
    const now = this.d.now();
    const cooldownMs = app.portal_reset_cooldown_hours * HOUR_MS;
    const ok = await this.d.repo.resetDevices(key.id, new Date(now), new Date(now - cooldownMs), one === undefined);
    if (ok && one !== undefined) await this.d.devices.remove(user ? 'user' : 'key', user ? user.id : key.id, one);
    if (!ok) {
      const next = (await this.nextResetAt(key.id, app.portal_reset_cooldown_hours))?.getTime() ?? now + 1000;
      throw new AppError('portal_reset_cooldown', undefined, {
        'Retry-After': String(Math.max(1, Math.ceil((next - now) / 1000))),
      });
    }
    this.d.audit.write({
      appId: key.app_id,
      action: 'portal.reset_hwid',
      detail: `Customer reset the devices of key ${key.key_preview}${user ? ` (user ${user.username})` : ''}`,
      resellerId: key.reseller_id,
      ip,
    });
    // Every worker's heartbeat owner ends the live sessions of the removed devices (with `hwid`, the
    // sessions activated from that one; without, all of the key's) and their channel clients get
    // `revoked`. Dashboards and webhooks see `hwid` only where view_hwid allows (access/visibility.ts).
    const data = {
      license_id: key.id,
      ...(user ? { user_id: user.id } : {}),
      ...(one !== undefined ? { hwid: one } : {}),
      by: 'portal',
      end_sessions: true,
    };
    await this.d.events.publish('license.reset_hwid', key.app_id, data, key.reseller_id);
    this.d.webhooks.notify(key.app_id, key.reseller_id, 'license.reset_hwid', data);
    return {
      success: true,
      next_reset_at: cooldownMs > 0 ? new Date(now + cooldownMs).toISOString() : null,
    };
  }

  /** docs/protocol.md 14.3: an offline file (12.5) for one of the customer's devices; audit `portal.offline`. */
  async offlineFile(s: PortalSessionRow, hwid: string, ip: string): Promise<{ success: true; license_file: string }> {
    const { key, user, app } = await this.writer(s);
    const { file } = await this.d.offline.offlineFileFor(
      app,
      { licenseId: key.id, userId: user?.id ?? null, username: user?.username ?? null },
      hwid,
    );
    this.d.audit.write({
      appId: key.app_id,
      action: 'portal.offline',
      detail: `Customer downloaded an offline license file for key ${key.key_preview} (${app.offline_days} days)`,
      resellerId: key.reseller_id,
      ip,
    });
    return { success: true, license_file: file };
  }

  async changePassword(s: PortalSessionRow, current: string, password: string, ip: string): Promise<void> {
    const { user } = await this.writer(s);
    if (!user) throw new AppError('portal_users_only');
    assertPasswordBytes(password);
    const lockKeys = [`${user.app_id}:u:${user.username.toLowerCase()}`, `${user.app_id}:ip:${ip}`];
    await this.lockout.attempt(lockKeys, async (attempt) => {
      if (!(await verifyPassword(user.password_hash, current))) {
        attempt.fail();
        throw new AppError('current_password_wrong');
      }
    });
    await this.d.customers.setPassword(user.id, await hashPassword(password));
    this.d.audit.write({
      appId: user.app_id,
      action: 'portal.password',
      detail: `User ${user.username} changed its password from the portal`,
      resellerId: user.reseller_id,
      ip,
    });
  }
}
