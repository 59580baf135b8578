// Client init, register and login (docs/spec.md endpoints, docs/protocol.md 2): a session opened, an end user
// registered with a key, an end user signed in. Every check is ordered; the order is the policy.
import { AppError } from '../../errors.js';
import {
  burnPasswordCheck,
  hashPassword,
  hmacSha256,
  constantTimeEqual,
  responseEncryptionKey,
  verifyPassword,
} from '../../platform/crypto/index.js';
import { normalizeHwid, outcome } from '../client/index.js';
import type {
  InitRequest,
  LoginRequest,
  RegisterRequest,
  AuditNote,
  ClientCall,
  ClientOutcome,
} from '../client/index.js';
import { toDate } from '../../platform/db/sql.js';
import { Lockout, reserve } from '../../platform/limits/lockout.js';
import { graceField, hasExpired, licenseHash } from '../keys/index.js';
import { deviceLimit } from './license-policy.js';
import {
  ActivationCalls,
  assertPasswordBytes,
  endUserName,
  responseKeyOf,
  type ActivationDeps,
} from './activation-calls.js';

const LOCKOUT_COUNTED = new Set(['license_invalid', 'license_used', 'username_taken', 'invalid_credentials']);

export class AccountCalls extends ActivationCalls {
  constructor(
    d: ActivationDeps,
    private readonly lockout: Lockout,
  ) {
    super(d);
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

  /** A login past its reserved attempt (docs/protocol.md 11.31): a failure marks it, the caller settles it. */
  private async loginChecked(
    call: ClientCall<LoginRequest>,
    note: AuditNote,
    { app, session, hwid, attempt, username }: Awaited<ReturnType<AccountCalls['accountCall']>>,
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
          : hasExpired(expiresAt, false, now)
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

  /** What register and login check first, in order: password size, lockout, paused, heartbeat. */
  private async accountCall(
    call: ClientCall<RegisterRequest | LoginRequest>,
    pausedCode: 'license_paused' | 'login_paused',
  ) {
    const { app, session } = this.auth(call);
    const username = endUserName(call.body.username);
    assertPasswordBytes(call.body.password);
    const lockKeys = [`${app.id}:u:${username.toLowerCase()}`, `${app.id}:ip:${call.ip}`];
    // docs/protocol.md 11.31: reserved before anything is checked; the caller settles it however the call ends.
    const attempt = await reserve([[this.lockout, lockKeys]]);
    try {
      if (app.keys_paused) throw new AppError(pausedCode);
      await this.requireHeartbeat(call);
    } catch (err) {
      await attempt.settle();
      throw err;
    }
    return { app, session, hwid: normalizeHwid(call.body.hwid), attempt, username };
  }
}
