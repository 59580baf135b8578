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
  RegisterRequest,
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
import { Lockout } from '../../platform/limits/lockout.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import type { Image, ScreenshotStore } from './screenshots.js';
import { alertReasons, type ActivationGeo, type Sighting } from '../geo/index.js';
import { keyPreview, licenseHash } from '../keys/index.js';

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

const LOCKOUT_COUNTED = new Set(['license_invalid', 'license_used', 'username_taken', 'invalid_credentials']);

export class ActivationService {
  private readonly lockout: Lockout;

  constructor(private readonly d: ActivationServiceDeps) {
    this.lockout = d.lockout ?? clientLockout(d.coordinator);
  }

  init(call: ClientCall<InitRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runInit(call, note));
  }

  private async runInit(call: ClientCall<InitRequest>, note: AuditNote) {
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
    const session = await this.d.sessions.create(app.id, responseKey);
    note.detail = `Session opened (version ${version})`;
    return {
      body: { success: true, session, app: { name: app.name, version: app.version, hwid_lock: app.hwid_lock } },
      responseKey,
    };
  }

  register(call: ClientCall<RegisterRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runRegister(call, note));
  }

  private async runRegister(call: ClientCall<RegisterRequest>, note: AuditNote) {
    const { app, session, hwid, lockKeys, username } = await this.accountCall(call, 'license_paused');
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
        },
        responseKey: responseKeyOf(session.record, call.app.row.api_secret),
      };
    } catch (err) {
      if (err instanceof AppError && LOCKOUT_COUNTED.has(err.code)) await this.lockout.fail(lockKeys);
      throw err;
    }
  }

  login(call: ClientCall<LoginRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runLogin(call, note));
  }

  private async runLogin(call: ClientCall<LoginRequest>, note: AuditNote) {
    const { app, session, hwid, lockKeys, username } = await this.accountCall(call, 'login_paused');
    const b = call.body;
    const shot = this.d.screenshots.decode(b.screenshot);
    const user = await this.d.users.findForLogin(app.id, username);
    // Unknown names cost the same Argon2id work as a wrong password; every failure reads the same.
    const passwordOk = user
      ? await verifyPassword(user.password_hash, b.password)
      : await burnPasswordCheck(b.password);
    const now = this.d.now();
    const expiresAt = toDate(user?.expires_at);
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
                : app.hwid_lock && user.hwid !== '' && user.hwid !== hwid
                  ? 'HWID mismatch'
                  : null;
    if (failure || !user) {
      await this.lockout.fail(lockKeys);
      note.detail = `401 login of ${username} failed: ${failure}`;
      note.resellerId = user?.reseller_id ?? null;
      throw new AppError('invalid_credentials');
    }
    await this.d.users.recordLogin(user, call.ip, hwid, app.hwid_lock && user.hwid === '', new Date(now));
    await this.d.sessions.activate(session.token, session.record, {
      username,
      userId: user.id,
      licenseId: user.license_id ?? undefined,
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
    const licenseId = await this.d.licenseOps.idByHash(app.id, licenseHash(this.d.licenseHashKey, b.license));
    if (!licenseId) throw new AppError('license_invalid');
    const v = await this.d.licenses.run(licenseId, {
      kind: 'activate',
      appId: app.id,
      hwid: b.hwid.toLowerCase(),
      ip: call.ip,
      hwidLock: app.hwid_lock,
    });
    await this.d.sessions.activate(session.token, session.record, { licenseId });
    note.detail = 'License activated';
    note.resellerId = (v.resellerId as string | null) ?? null;
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
      body: { success: true, message: 'License activated', level: v.level, expires_at: v.expiresAt },
      responseKey: responseKeyOf(session.record, call.app.row.api_secret),
    };
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
    await this.lockout.check(lockKeys);
    if (app.keys_paused) throw new AppError(pausedCode);
    await this.requireHeartbeat(call);
    return { app, session, hwid: call.body.hwid.toLowerCase(), lockKeys, username };
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
