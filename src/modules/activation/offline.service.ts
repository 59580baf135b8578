// Offline license files (docs/protocol.md 12.5): the client's offline call, the customer portal's and the
// dashboard's issue for an air-gapped machine.
import { AppError } from '../../errors.js';
import { normalizeHwid, outcome } from '../client/index.js';
import type { OfflineRequest, AuditNote, ClientAppRow, ClientCall, ClientOutcome } from '../client/index.js';
import { hasExpired, licenseHash } from '../keys/index.js';
import type { DeviceHolderKind } from '../keys/index.js';
import { offlineFile } from './offline-file.js';
import { ActivationCalls, responseKeyOf } from './activation-calls.js';

/** What the dashboard's offline issue needs of the application. */
interface OfflineApp {
  id: string;
  hwidLock: boolean;
  maxDevices: number;
  offlineDays: number;
}

export class OfflineFiles extends ActivationCalls {
  offline(call: ClientCall<OfflineRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runOffline(call, note));
  }

  /** docs/protocol.md 12.5: a signed file for a machine of this session's activated license. */
  private async runOffline(call: ClientCall<OfflineRequest>, note: AuditNote) {
    const { app, session } = this.auth(call);
    if (app.offline_days <= 0) throw new AppError('offline_disabled');
    const s = session.record;
    if (!this.d.sessions.isActivated(s) || !s.licenseId) throw new AppError('session_not_activated');
    const hwid = normalizeHwid(call.body.hwid);
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
   * docs/protocol.md 12.5: the signed file for a machine the license (or its end user) already holds: the
   * client's offline call and the customer portal's. A deleted key is unknown (`license_invalid`);
   * banned and expired answer as `license` does; a HWID not among the holder's devices is a mismatch.
   */
  async offlineFileFor(
    app: Pick<ClientAppRow, 'id' | 'hwid_lock' | 'offline_days'>,
    holder: { licenseId: string; userId: string | null; username: string | null },
    hwid: string,
  ): Promise<{ file: string; resellerId: string | null }> {
    if (app.offline_days <= 0) throw new AppError('offline_disabled');
    const h = normalizeHwid(hwid);
    const key = await this.d.licenseOps.load(holder.licenseId);
    if (!key) throw new AppError('license_invalid');
    if (key.status === 'banned') throw new AppError('license_banned');
    const user = holder.userId ? await this.d.users.grantOf(holder.userId) : undefined;
    if (holder.userId && (!user || user.banned)) throw new AppError('license_banned');
    const expiresAt = user ? user.expiresAt : key.expiresAt;
    const lifetime = !user && key.durationUnit === 'lifetime';
    if (hasExpired(expiresAt, lifetime, this.d.now())) throw new AppError('license_expired');
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
   * The dashboard's offline file for an air-gapped machine (docs/protocol.md 12.5): the HWID is bound like a
   * license-only activation through the key's actor (an unused key becomes used, banned and expired
   * keys are refused with docs/spec.md's license errors, devices and hwid_lock apply), then the file is signed.
   */
  async offlineForKey(
    app: OfflineApp,
    licenseId: string,
    hwid: string,
    user: string | null,
    ip: string,
  ): Promise<{ file: string; resellerId: string | null }> {
    if (app.offlineDays <= 0) throw new AppError('offline_disabled');
    const h = normalizeHwid(hwid);
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
    const h = normalizeHwid(req.hwid);
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
}
