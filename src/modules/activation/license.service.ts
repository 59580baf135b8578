// Client license (docs/spec.md endpoints, docs/protocol.md 2 and 12.1): a key activated license-only through its
// actor, then its device admitted.
import { AppError } from '../../errors.js';
import { normalizeHwid, outcome } from '../client/index.js';
import type { LicenseRequest, AuditNote, ClientCall, ClientOutcome } from '../client/index.js';
import { graceField, keyPreview, licenseHash } from '../keys/index.js';
import { KeyIds } from './key-ids.js';
import { ActivationCalls, responseKeyOf, type ActivationDeps } from './activation-calls.js';

export class LicenseCalls extends ActivationCalls {
  private readonly keyIds: KeyIds;

  constructor(d: ActivationDeps) {
    super(d);
    this.keyIds = new KeyIds((appId, keyHash) => d.licenseOps.idByHash(appId, keyHash));
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
    const hwid = normalizeHwid(b.hwid);
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
      { license_id: licenseId, hwid: normalizeHwid(b.hwid), ip: call.ip },
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
      hwid: normalizeHwid(b.hwid),
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
   * like docs/spec.md's HWID mismatch). A key registered by an end user keeps docs/spec.md's single pin.
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
}
