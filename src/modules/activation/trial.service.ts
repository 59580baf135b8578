// Client trial (docs/protocol.md 12.4): a trial key created already activated on the caller's HWID.
import { AppError } from '../../errors.js';
import { normalizeHwid, outcome } from '../client/index.js';
import type { TrialRequest, AuditNote, ClientCall, ClientOutcome } from '../client/index.js';
import { DEFAULT_ALPHABET, expandMask, graceField, keyPreview, licenseHash } from '../keys/index.js';
import { ActivationCalls, responseKeyOf } from './activation-calls.js';

/** docs/protocol.md 12.4: trial keys look like this. */
const TRIAL_MASK = 'TRIAL-****-****-****';

export class TrialCalls extends ActivationCalls {
  trial(call: ClientCall<TrialRequest>): Promise<ClientOutcome> {
    return outcome((note) => this.runTrial(call, note));
  }

  /** docs/protocol.md 12.4: once per HWID and application, ever; the key is returned this once. */
  private async runTrial(call: ClientCall<TrialRequest>, note: AuditNote) {
    const { app, session } = this.auth(call);
    if (app.trial_hours <= 0) throw new AppError('trial_disabled');
    if (app.keys_paused) throw new AppError('license_paused');
    await this.requireHeartbeat(call);
    const hwid = normalizeHwid(call.body.hwid);
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
}
