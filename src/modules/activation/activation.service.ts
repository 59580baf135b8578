// The client runtime contract: init, register, login, license (SPEC endpoints and error tables,
// PROTOCOL 2). Every check below is ordered; the order is the policy.
import { AppError, validationError } from '../../errors.js';
import {
  burnPasswordCheck,
  hashPassword,
  hmacSha256,
  constantTimeEqual,
  responseEncryptionKey,
  verifyPassword,
} from '../../platform/crypto/index.js';
import { outcome } from '../client/index.js';
import type {
  InitRequest,
  LicenseRequest,
  LoginRequest,
  OfflineRequest,
  RegisterRequest,
  TrialRequest,
  AuditNote,
  ClientCall,
  ClientOutcome,
  ClientSession,
  ClientSessions,
} from '../client/index.js';
import type { LicenseHost } from './license-host.js';
import type { LicenseOpsRepository } from './license-ops.repository.js';
import type { EndUserRepository } from './end-user.repository.js';
import type { AuditRepository } from '../audit/index.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { HeartbeatGateway } from '../heartbeat/index.js';
import { toDate } from '../../platform/db/sql.js';
import { Lockout, reserve } from '../../platform/limits/lockout.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import type { Image, ScreenshotStore } from './screenshots.js';
import { alertReasons, type ActivationGeo, type Sighting } from '../geo/index.js';
import { DEFAULT_ALPHABET, expandMask, graceField, keyPreview, licenseHash } from '../keys/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { ClientAppRow } from '../apps/index.js';
import type { DeviceHolderKind, DeviceRepository } from './device.repository.js';
import type { TrialRepository } from './trial.repository.js';
import { offlineFile } from './offline-file.js';
import { deviceLimit } from './license-policy.js';
import { KeyIds } from './key-ids.js';
import type { KeyTouchesRepository } from './key-touches.repository.js';

/** PROTOCOL 12.4: trial keys look like this. */
const TRIAL_MASK = 'TRIAL-****-****-****';

const MAX_PASSWORD_BYTES = 72;

interface ActivationServiceDeps {
  now: () => number;
  coordinator: Coordinator;
  sessions: ClientSessions;
  heartbeats: Pick<HeartbeatGateway, 'isAlive'>;
  licenses: Pick<LicenseHost, 'run'>;
  licenseOps: LicenseOpsRepository;
  users: EndUserRepository;
  audit: AuditRepository;
  licenseHashKey: Buffer;
  events: EventBus;
  webhooks: WebhookService;
  screenshots: ScreenshotStore;
  geo: ActivationGeo;
  devices: DeviceRepository;
  /** Write-behind of a held device's last-seen. */
  touches: Pick<KeyTouchesRepository, 'seen'>;
  trials: TrialRepository;
  /** The active response-signing key: offline license files are signed with it (PROTOCOL 12.5). */
  signing: () => ResponseSigningKey;
  /** The client lockouts, when another sign-in shares them (else this service's own). */
  lockout?: Lockout;
}

/**
 * The client lockouts (PROTOCOL 2): one instance per worker, shared by every sign-in that guesses
 * the same names and keys (client login and register, the customer portal).
 */
export function clientLockout(coordinator: Coordinator): Lockout {
  return new Lockout(coordinator, { name: 'client', failures: 10, windowSeconds: 900, lockSeconds: 900 });
}

/** What the dashboard's offline issue needs of the application. */
interface OfflineApp {
  id: string;
  hwidLock: boolean;
  maxDevices: number;
  offlineDays: number;
}

const LOCKOUT_COUNTED = new Set(['license_invalid', 'license_used', 'username_taken', 'invalid_credentials']);

export class ActivationService {
  private readonly lockout: Lockout;
  private readonly keyIds: KeyIds;

  constructor(private readonly d: ActivationServiceDeps) {
    this.lockout = d.lockout ?? clientLockout(d.coordinator);
    this.keyIds = new KeyIds((appId, keyHash) => d.licenseOps.idByHash(appId, keyHash));
  }

  /** Answered synchronously when the session needs no stored response key (no enc_key). */
  init(call: ClientCall<InitRequest>): ClientOutcome | Promise<ClientOutcome> {
    return outcome((note) => this.runInit(call, note));
  }

  private runInit(call: ClientCall<InitRequest>, note: AuditNote) {
    const app = call.app.row;
    const b = call.body;
    const version = b.version ?? '1.0';
    if (version !== app.version) {
      if (app.force_update) {
        throw new AppError('update_required', {
          message: app.update_message || 'A new version is required.',
          latest_version: app.version,
          update_url: app.update_url,
          force_update: true,
        });
      }
      this.d.audit.write({
        appId: app.id,
        action: 'client.version_mismatch',
        level: 'warning',
        ip: call.ip,
        detail: `Client version ${version} differs from application version ${app.version}`,
      });
    }
    if (app.force_encryption && !b.enc_key) throw new AppError('encryption_key_required');
    if (app.hash_check && !(b.binary_hash && app.allowed_hashes.includes(b.binary_hash.toLowerCase())))
      throw new AppError('binary_hash_mismatch');
    if (b.binary_token !== undefined) {
      const expected = hmacSha256(app.api_secret, b.binary_token).toString('hex');
      if (!b.binary_token_hash || !constantTimeEqual(expected, b.binary_token_hash.toLowerCase()))
        throw new AppError('binary_token_invalid');
    }
    // The key is derived once, with the api_secret the client opened the session with.
    const responseKey = b.enc_key ? responseEncryptionKey(b.enc_key, app.api_secret) : null;
    const opened = (session: string) => {
      note.detail = `Session opened (version ${version})`;
      return {
        body: { success: true, session, app: { name: app.name, version: app.version, hwid_lock: app.hwid_lock } },
        responseKey,
      };
    };
    const session = this.d.sessions.create(app.id, responseKey);
    return typeof session === 'string' ? opened(session) : session.then(opened);
  }

  register(call: ClientCall<RegisterRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runRegister(call, note));
  }

  private async runRegister(call: ClientCall<RegisterRequest>, note: AuditNote) {
    const { app, session, hwid, attempt, username } = await this.accountCall(call, 'license_paused');
    const b = call.body;
    const shot = this.d.screenshots.decode(b.screenshot);
    try {
      const licenseId = await this.d.licenseOps.idByHash(app.id, licenseHash(this.d.licenseHashKey, b.license));
      if (!licenseId) throw new AppError('license_invalid');
      // Hashed before the claim, so the key stays pending for as short a time as possible.
      const passwordHash = await hashPassword(b.password);
      const v = await this.d.licenses.run(licenseId, {
        kind: 'register',
        appId: app.id,
        username,
        passwordHash,
        hwid,
        ip: call.ip,
        hwidLock: app.hwid_lock,
      });
      await this.d.sessions.activate(session.token, session.record, {
        username,
        userId: v.userId as string,
        licenseId,
        hwid,
      });
      note.detail = `User ${username} registered`;
      note.resellerId = (v.resellerId as string | null) ?? null;

      await this.d.events.publish(
        'client.register',
        app.id,
        { username, user_id: v.userId, license_id: licenseId, hwid, ip: call.ip },
        note.resellerId,
      );
      const shotPath = await this.keepScreenshot(app.id, [v.userId as string, licenseId], shot, async (p) => {
        await this.d.users.setScreenshot(v.userId as string, 'activation', p);
        await this.d.licenseOps.setScreenshot(licenseId, p);
      });
      note.screen = shotPath;
      const seen = await this.d.geo.user(call.ip, v.userId as string, { licenseId });
      // The first device of a new account is its activation, not an alert.
      this.announce(call, note, 'client.register', seen, false, {
        username,
        hwid,
        ip: call.ip,
        new_device: true,
        screenshot: shotPath,
      });
      return {
        body: {
          success: true,
          message: 'Registered successfully',
          user: { username, level: v.level, expires_at: v.expiresAt },
          entitlements: (v.entitlements as string[] | undefined) ?? [],
          ...graceField(app.grace_hours, (v.expiresAt as string | null) ?? null, this.d.now()),
        },
        responseKey: responseKeyOf(session.record, call.app.row.api_secret),
      };
    } catch (err) {
      if (err instanceof AppError && LOCKOUT_COUNTED.has(err.code)) attempt.fail();
      throw err;
    } finally {
      await attempt.settle();
    }
  }

  login(call: ClientCall<LoginRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runLogin(call, note));
  }

  private async runLogin(call: ClientCall<LoginRequest>, note: AuditNote) {
    const account = await this.accountCall(call, 'login_paused');
    try {
      return await this.loginChecked(call, note, account);
    } finally {
      await account.attempt.settle();
    }
  }

  /** A login past its reserved attempt (PROTOCOL 11.31): a failure marks it, the caller settles it. */
  private async loginChecked(
    call: ClientCall<LoginRequest>,
    note: AuditNote,
    { app, session, hwid, attempt, username }: Awaited<ReturnType<ActivationService['accountCall']>>,
  ) {
    const b = call.body;
    const shot = this.d.screenshots.decode(b.screenshot);
    const user = await this.d.users.findForLogin(app.id, username);
    // Unknown names cost the same Argon2id work as a wrong password; every failure reads the same.
    const passwordOk = user
      ? await verifyPassword(user.password_hash, b.password)
      : await burnPasswordCheck(b.password);
    const now = this.d.now();
    const expiresAt = toDate(user?.expires_at);
    const limit = deviceLimit({ maxDevices: user?.key_max_devices ?? null }, app.max_devices);
    const devices = user && app.hwid_lock ? await this.d.devices.facts('user', user.id, hwid) : undefined;
    const failure = !user
      ? 'unknown user'
      : !passwordOk
        ? 'wrong password'
        : user.banned
          ? 'user banned'
          : expiresAt && expiresAt.getTime() < now
            ? 'user expired'
            : user.key_status === null
              ? 'license key deleted'
              : user.key_status === 'banned'
                ? 'license key banned'
                : devices && !devices.held && devices.bound >= limit
                  ? 'HWID mismatch'
                  : null;
    if (failure || !user) {
      attempt.fail();
      note.detail = `401 login of ${username} failed: ${failure}`;
      note.resellerId = user?.reseller_id ?? null;
      throw new AppError('invalid_credentials');
    }
    // The admission is exact in the database: a concurrent login from another new HWID may have taken the last place.
    const admitted = await this.admitDevice(call, 'user', user.id, hwid, {
      limit,
      bindIfRoom: false,
      resellerId: user.reseller_id,
      data: { user_id: user.id, username, license_id: user.license_id },
    });
    if (!admitted) {
      attempt.fail();
      note.detail = `401 login of ${username} failed: HWID mismatch`;
      note.resellerId = user.reseller_id;
      throw new AppError('invalid_credentials');
    }
    await this.d.users.recordLogin(user, call.ip, hwid, app.hwid_lock && user.hwid === '', new Date(now));
    await this.d.sessions.activate(session.token, session.record, {
      username,
      userId: user.id,
      licenseId: user.license_id ?? undefined,
      hwid,
    });
    note.detail = `User ${username} logged in`;
    note.resellerId = user.reseller_id;
    await this.d.events.publish(
      'client.login',
      app.id,
      { username, user_id: user.id, hwid, ip: call.ip },
      user.reseller_id,
    );
    const shotPath = await this.keepScreenshot(app.id, [user.id], shot, (p) =>
      this.d.users.setScreenshot(user.id, 'last', p),
    );
    note.screen = shotPath;
    const seen = await this.d.geo.user(call.ip, user.id, null);
    const newDevice = !user.known_hwids.includes(hwid);
    this.announce(call, note, 'client.login', seen, newDevice, {
      username,
      hwid,
      ip: call.ip,
      new_device: newDevice,
      screenshot: shotPath,
    });
    return {
      body: {
        success: true,
        message: 'Logged in successfully',
        user: { username, level: user.level, expires_at: expiresAt?.toISOString() ?? null },
        entitlements: [...(user.entitlements ?? [])].sort(),
        ...graceField(app.grace_hours, expiresAt, now),
      },
      responseKey: responseKeyOf(session.record, call.app.row.api_secret),
    };
  }

  license(call: ClientCall<LicenseRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runLicense(call, note));
  }

  private async runLicense(call: ClientCall<LicenseRequest>, note: AuditNote) {
    const { app, session } = this.auth(call);
    const b = call.body;
    const shot = this.d.screenshots.decode(b.screenshot);
    if (app.keys_paused) throw new AppError('license_paused');
    await this.requireHeartbeat(call);
    const hwid = b.hwid.toLowerCase();
    const op = {
      kind: 'activate' as const,
      appId: app.id,
      hwid,
      ip: call.ip,
      hwidLock: app.hwid_lock,
      maxDevices: app.max_devices,
    };
    const key = await this.keyIds.run(
      app.id,
      licenseHash(this.d.licenseHashKey, b.license),
      (id) => this.d.licenses.run(id, op),
      (err) => err instanceof AppError && err.code === 'license_invalid',
    );
    if (!key) throw new AppError('license_invalid');
    const { id: licenseId, value: v } = key;
    note.resellerId = (v.resellerId as string | null) ?? null;
    await this.keyDevice(call, licenseId, hwid, v, { key_preview: keyPreview(b.license) });
    await this.d.sessions.activate(session.token, session.record, { licenseId, hwid });
    note.detail = 'License activated';
    await this.d.events.publish(
      'client.license',
      app.id,
      { license_id: licenseId, hwid: b.hwid.toLowerCase(), ip: call.ip },
      note.resellerId,
    );
    const shotPath = await this.keepScreenshot(app.id, [licenseId], shot, (p) =>
      this.d.licenseOps.setScreenshot(licenseId, p),
    );
    note.screen = shotPath;
    const seen = await this.d.geo.key(call.ip, licenseId);
    // A key's first activation pins its first device: only a later, different device is an alert.
    this.announce(call, note, 'client.license', seen, v.newDevice === true && v.firstUse !== true, {
      license_id: licenseId,
      key_preview: keyPreview(b.license),
      hwid: b.hwid.toLowerCase(),
      ip: call.ip,
      new_device: v.newDevice === true,
      screenshot: shotPath,
    });
    return {
      body: {
        success: true,
        message: 'License activated',
        level: v.level,
        expires_at: v.expiresAt,
        entitlements: v.entitlements ?? [],
        ...graceField(app.grace_hours, (v.expiresAt as string | null) ?? null, this.d.now()),
      },
      responseKey: responseKeyOf(session.record, call.app.row.api_secret),
    };
  }

  /**
   * A license-only key's device after the key accepted the activation: a HWID it holds is touched,
   * a new one is admitted in the database (exact under concurrency: past the limit it is refused
   * like SPEC's HWID mismatch). A key registered by an end user keeps SPEC's single pin.
   */
  private async keyDevice(
    call: ClientCall<unknown>,
    licenseId: string,
    hwid: string,
    v: Record<string, unknown>,
    data: Record<string, unknown>,
  ): Promise<void> {
    if (v.licenseOnly !== true) return;
    if (v.deviceHeld === true) {
      await this.d.touches.seen(licenseId, hwid, new Date(this.d.now()));
      return;
    }
    const admitted = await this.admitDevice(call, 'key', licenseId, hwid, {
      limit: v.maxDevices as number,
      bindIfRoom: true,
      resellerId: (v.resellerId as string | null) ?? null,
      data: { license_id: licenseId, ...data },
      // A key's first machine is its activation, announced as such.
      announce: v.firstUse !== true,
    });
    if (!admitted) throw new AppError('hwid_mismatch');
  }

  /** Records a device (PROTOCOL 12.1); false when hwid_lock is on and the holder has no place left. */
  private async admitDevice(
    call: ClientCall<unknown>,
    kind: DeviceHolderKind,
    id: string,
    hwid: string,
    o: {
      limit: number;
      bindIfRoom: boolean;
      resellerId: string | null;
      data: Record<string, unknown>;
      announce?: boolean;
    },
  ): Promise<boolean> {
    const app = call.app.row;
    const a = await this.d.devices.admit(kind, id, hwid, {
      limit: o.limit,
      enforce: app.hwid_lock,
      bindIfRoom: o.bindIfRoom,
      now: new Date(this.d.now()),
    });
    if (a.result === 'full') return false;
    // The activation's own webhook says new_device (SPEC's alert webhook): no second webhook here.
    if (a.isNew && o.announce !== false) await this.deviceAdded(app.id, kind, id, hwid, o.resellerId, o.data, false);
    return true;
  }

  /**
   * A device added to a key or an end user: audit and live event `device.add`, and the webhook
   * `device.add` where no activation webhook (which carries new_device) announces it.
   */
  private async deviceAdded(
    appId: string,
    kind: DeviceHolderKind,
    id: string,
    hwid: string,
    resellerId: string | null,
    data: Record<string, unknown>,
    webhook: boolean,
  ): Promise<void> {
    const who = kind === 'user' ? `user ${String(data.username)}` : `key ${String(data.key_preview ?? id.slice(0, 8))}`;
    this.d.audit.write({ appId, action: 'device.add', detail: `New device on ${who}`, resellerId });
    const payload = { ...data, hwid };
    await this.d.events.publish('device.add', appId, payload, resellerId);
    if (webhook) this.d.webhooks.notify(appId, resellerId, 'device.add', payload);
  }

  trial(call: ClientCall<TrialRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runTrial(call, note));
  }

  /** PROTOCOL 12.4: once per HWID and application, ever; the key is returned this once. */
  private async runTrial(call: ClientCall<TrialRequest>, note: AuditNote) {
    const { app, session } = this.auth(call);
    if (app.trial_hours <= 0) throw new AppError('trial_disabled');
    if (app.keys_paused) throw new AppError('license_paused');
    await this.requireHeartbeat(call);
    const hwid = call.body.hwid.toLowerCase();
    const now = this.d.now();
    for (let attempt = 0; ; attempt++) {
      const key = expandMask(TRIAL_MASK, DEFAULT_ALPHABET);
      const r = await this.d.trials.create({
        appId: app.id,
        hwid,
        ip: call.ip,
        keyHash: licenseHash(this.d.licenseHashKey, key),
        keyPreview: keyPreview(key),
        level: app.trial_level,
        hours: app.trial_hours,
        now: new Date(now),
      });
      if (r.kind === 'used') {
        note.detail = '403 trial refused: this device had one';
        throw new AppError('trial_used');
      }
      if (r.kind === 'collision') {
        if (attempt < 5) continue;
        throw new Error('trial key space exhausted');
      }
      await this.d.sessions.activate(session.token, session.record, { licenseId: r.licenseId, hwid });
      const expiresAt = r.expiresAt.toISOString();
      note.detail = `Trial started (${app.trial_hours} hours, level ${app.trial_level})`;
      const data = { license_id: r.licenseId, key_preview: keyPreview(key), hwid, expires_at: expiresAt };
      await this.d.events.publish('client.trial', app.id, { ...data, ip: call.ip });
      this.d.webhooks.notify(app.id, null, 'client.trial', { ...data, ip: call.ip });
      return {
        body: {
          success: true,
          message: 'Trial started',
          level: app.trial_level,
          expires_at: expiresAt,
          entitlements: [] as string[],
          ...graceField(app.grace_hours, expiresAt, now),
          key,
        },
        responseKey: responseKeyOf(session.record, app.api_secret),
      };
    }
  }

  offline(call: ClientCall<OfflineRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runOffline(call, note));
  }

  /** PROTOCOL 12.5: a signed file for a machine of this session's activated license. */
  private async runOffline(call: ClientCall<OfflineRequest>, note: AuditNote) {
    const { app, session } = this.auth(call);
    if (app.offline_days <= 0) throw new AppError('offline_disabled');
    const s = session.record;
    if (!this.d.sessions.isActivated(s) || !s.licenseId) throw new AppError('session_not_activated');
    const hwid = call.body.hwid.toLowerCase();
    const { file, resellerId } = await this.offlineFileFor(
      app,
      { licenseId: s.licenseId, userId: s.userId, username: s.username ?? null },
      hwid,
    );
    note.detail = `Offline license file issued (${app.offline_days} days)`;
    note.resellerId = resellerId;
    const data = { license_id: s.licenseId, username: s.username ?? null, hwid, offline_days: app.offline_days };
    await this.d.events.publish('client.offline', app.id, data, resellerId);
    this.d.webhooks.notify(app.id, resellerId, 'client.offline', data);
    return {
      body: { success: true, license_file: file },
      responseKey: responseKeyOf(s, app.api_secret),
    };
  }

  /**
   * PROTOCOL 12.5: the signed file for a machine the license (or its end user) already holds: the
   * client's offline call and the customer portal's. A deleted key is unknown (`license_invalid`);
   * banned and expired answer as `license` does; a HWID not among the holder's devices is a mismatch.
   */
  async offlineFileFor(
    app: Pick<ClientAppRow, 'id' | 'hwid_lock' | 'offline_days'>,
    holder: { licenseId: string; userId: string | null; username: string | null },
    hwid: string,
  ): Promise<{ file: string; resellerId: string | null }> {
    if (app.offline_days <= 0) throw new AppError('offline_disabled');
    const h = hwid.toLowerCase();
    const key = await this.d.licenseOps.load(holder.licenseId);
    if (!key) throw new AppError('license_invalid');
    if (key.status === 'banned') throw new AppError('license_banned');
    const user = holder.userId ? await this.d.users.grantOf(holder.userId) : undefined;
    if (holder.userId && (!user || user.banned)) throw new AppError('license_banned');
    const expiresAt = user ? user.expiresAt : key.expiresAt;
    const lifetime = !user && key.durationUnit === 'lifetime';
    if (expiresAt && !lifetime && expiresAt.getTime() <= this.d.now()) throw new AppError('license_expired');
    const kind: DeviceHolderKind = holder.userId ? 'user' : 'key';
    const devices = await this.d.devices.facts(kind, holder.userId ?? holder.licenseId, h);
    if (!(app.hwid_lock ? devices.held : devices.known)) throw new AppError('hwid_mismatch');
    const file = offlineFile(
      this.d.signing(),
      {
        appId: app.id,
        licenseId: holder.licenseId,
        user: holder.username,
        hwid: h,
        level: user ? user.level : key.level,
        entitlements: key.entitlements,
        expiresAt: lifetime ? null : expiresAt,
        offlineDays: app.offline_days,
      },
      this.d.now(),
    );
    return { file, resellerId: key.resellerId };
  }

  /**
   * The dashboard's offline file for an air-gapped machine (PROTOCOL 12.5): the HWID is bound like a
   * license-only activation through the key's actor (an unused key becomes used, banned and expired
   * keys are refused with SPEC's license errors, devices and hwid_lock apply), then the file is signed.
   */
  async offlineForKey(
    app: OfflineApp,
    licenseId: string,
    hwid: string,
    user: string | null,
    ip: string,
  ): Promise<{ file: string; resellerId: string | null }> {
    if (app.offlineDays <= 0) throw new AppError('offline_disabled');
    const h = hwid.toLowerCase();
    await this.bindOffline(app, licenseId, h, ip);
    return this.signOffline(app, licenseId, h, user, app.offlineDays);
  }

  /**
   * An air-gapped machine's activation request (docs/air-gapped.md "Activation by file"): the key the
   * request names is activated license-only on its HWID exactly as `license` would (paused keys,
   * unknown, banned and expired keys, devices, hwid_lock, expiry stamping: the same errors), and the
   * file it answers carries the request's nonce and lasts offline_days, at least one day.
   * `admit` sees the key before anything is written and throws to refuse it (a caller's scope).
   */
  async offlineActivation(
    app: OfflineApp & { keysPaused: boolean },
    req: { key: string; hwid: string; nonce: string; ip: string },
    admit: (key: { id: string; resellerId: string | null }) => void,
  ): Promise<{ file: string; licenseId: string; resellerId: string | null; days: number }> {
    if (app.keysPaused) throw new AppError('license_paused');
    const licenseId = await this.d.licenseOps.idByHash(app.id, licenseHash(this.d.licenseHashKey, req.key));
    const stored = licenseId ? await this.d.licenseOps.load(licenseId) : undefined;
    if (!licenseId || !stored) throw new AppError('license_invalid');
    admit({ id: licenseId, resellerId: stored.resellerId });
    const h = req.hwid.toLowerCase();
    await this.bindOffline(app, licenseId, h, req.ip);
    const user = stored.userId ? stored.usedBy : null;
    const days = Math.max(1, app.offlineDays);
    const { file, resellerId } = await this.signOffline(app, licenseId, h, user, days, req.nonce);
    return { file, licenseId, resellerId, days };
  }

  /** A license-only activation of the key on `hwid` for an offline file, through the key's actor. */
  private async bindOffline(app: OfflineApp, licenseId: string, h: string, ip: string): Promise<void> {
    const v = await this.d.licenses.run(licenseId, {
      kind: 'activate',
      appId: app.id,
      hwid: h,
      ip,
      hwidLock: app.hwidLock,
      maxDevices: app.maxDevices,
    });
    if (v.licenseOnly === true && v.deviceHeld !== true) {
      const a = await this.d.devices.admit('key', licenseId, h, {
        limit: v.maxDevices as number,
        enforce: app.hwidLock,
        bindIfRoom: true,
        now: new Date(this.d.now()),
      });
      if (a.result === 'full') throw new AppError('hwid_mismatch');
      const resellerId = (v.resellerId as string | null) ?? null;
      if (a.isNew) await this.deviceAdded(app.id, 'key', licenseId, h, resellerId, { license_id: licenseId }, true);
    }
  }

  private async signOffline(
    app: OfflineApp,
    licenseId: string,
    h: string,
    user: string | null,
    days: number,
    requestNonce?: string,
  ): Promise<{ file: string; resellerId: string | null }> {
    const key = await this.d.licenseOps.load(licenseId);
    if (!key) throw new AppError('license_not_found');
    const file = offlineFile(
      this.d.signing(),
      {
        appId: app.id,
        licenseId,
        user,
        hwid: h,
        level: key.level,
        entitlements: key.entitlements,
        expiresAt: key.durationUnit === 'lifetime' ? null : key.expiresAt,
        offlineDays: days,
        ...(requestNonce === undefined ? {} : { requestNonce }),
      },
      this.d.now(),
    );
    return { file, resellerId: key.resellerId };
  }

  /** PROTOCOL 12.6 for heartbeat answers: the grace of the session's license, or nothing. */
  async graceForSession(
    app: Pick<ClientAppRow, 'grace_hours'>,
    s: { userId: string | null; licenseId: string | null },
  ): Promise<{ grace_until?: string }> {
    if (app.grace_hours <= 0) return {};
    const expiresAt = s.userId
      ? ((await this.d.users.grantOf(s.userId))?.expiresAt ?? null)
      : s.licenseId
        ? await this.d.licenseOps.expiryOf(s.licenseId)
        : null;
    return graceField(app.grace_hours, expiresAt, this.d.now());
  }

  /**
   * After a successful activation: a warning `client.alert` audit line when it came from a new device
   * or a new location (SPEC "Alert webhook" rule 1), and the activation webhook, which carries the
   * location and says which alert, if any, it is.
   */
  private announce(
    call: ClientCall<unknown>,
    note: AuditNote,
    event: string,
    seen: Sighting,
    newDevice: boolean,
    data: Record<string, unknown>,
  ): void {
    const app = call.app.row;
    const alert = alertReasons(newDevice, seen.newLocation);
    const resellerId = note.resellerId ?? null;
    if (alert.length > 0) {
      // No place or address in the detail: resellers who may not see addresses see the detail too.
      const who = typeof data.username === 'string' ? `user ${data.username}` : `key ${String(data.key_preview)}`;
      this.d.audit.write({
        appId: app.id,
        action: 'client.alert',
        level: 'warning',
        ip: call.ip,
        location: seen.location,
        resellerId,
        detail:
          `${event} of ${who} from ` +
          alert.map((a) => (a === 'new_device' ? 'a new device' : 'a new location')).join(' and '),
      });
    }
    this.d.webhooks.notify(app.id, resellerId, event, {
      ...data,
      geo: seen.geo,
      location: seen.location,
      new_location: seen.newLocation,
      alert,
    });
  }

  /** Writes an accepted activation's screenshot and records its path; '' when none was sent. */
  private async keepScreenshot(
    appId: string,
    owners: readonly string[],
    shot: Image | undefined,
    record: (path: string) => Promise<void>,
  ): Promise<string> {
    if (!shot) return '';
    const rel = await this.d.screenshots.save(appId, owners, shot);
    await record(rel);
    return rel;
  }

  private auth<B>(call: ClientCall<B>) {
    if (!call.session) throw new AppError('session_invalid');
    return { app: call.app.row, session: call.session };
  }

  /** What register and login check first, in order: password size, lockout, paused, heartbeat. */
  private async accountCall(
    call: ClientCall<RegisterRequest | LoginRequest>,
    pausedCode: 'license_paused' | 'login_paused',
  ) {
    const { app, session } = this.auth(call);
    const username = endUserName(call.body.username);
    assertPasswordBytes(call.body.password);
    const lockKeys = [`${app.id}:u:${username.toLowerCase()}`, `${app.id}:ip:${call.ip}`];
    // PROTOCOL 11.31: reserved before anything is checked; the caller settles it however the call ends.
    const attempt = await reserve([[this.lockout, lockKeys]]);
    try {
      if (app.keys_paused) throw new AppError(pausedCode);
      await this.requireHeartbeat(call);
    } catch (err) {
      await attempt.settle();
      throw err;
    }
    return { app, session, hwid: call.body.hwid.toLowerCase(), attempt, username };
  }

  /** PROTOCOL 2: the first auth call on a fresh session is free; later ones need a live heartbeat. */
  private async requireHeartbeat<B>(call: ClientCall<B>): Promise<void> {
    if (!call.app.row.require_heartbeat || !call.session) return;
    if (!this.d.sessions.isActivated(call.session.record)) return;
    if (!(await this.d.heartbeats.isAlive(call.session.token))) throw new AppError('heartbeat_required');
  }
}

/** A session's response key; records stored before sealed tokens kept the enc_key itself. */
function responseKeyOf(s: ClientSession, apiSecret: string): Buffer | null {
  return typeof s.encKey === 'string' ? responseEncryptionKey(s.encKey, apiSecret) : s.encKey;
}

/** Control characters and the bidirectional overrides and isolates that make a name read as another. */
const UNSAFE_NAME = /[\p{Cc}\u200E\u200F\u061C\u202A-\u202E\u2066-\u2069]/u;

/**
 * PROTOCOL 11.28: end-user names are stored in NFC, so a composed and a decomposed `Åsa` are one
 * name; a name with control or bidirectional-override characters is refused.
 */
function endUserName(raw: string): string {
  if (UNSAFE_NAME.test(raw))
    throw validationError('username', 'Username must not contain control or bidirectional characters', 'value_error');
  return raw.normalize('NFC');
}

function assertPasswordBytes(password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw validationError('password', `Password must be at most ${MAX_PASSWORD_BYTES} UTF-8 bytes`, 'string_too_long');
  }
}
