// What every client activation call shares (docs/spec.md endpoints and error tables, docs/protocol.md 2): the
// dependencies, the session check, the heartbeat requirement, devices admitted to a key or a user,
// the alert and webhook after an activation, and the screenshot it kept. Each use case extends it:
// account.service.ts (init, register, login), license.service.ts, trial.service.ts, offline.service.ts.
import { AppError, validationError } from '../../errors.js';
import { responseEncryptionKey } from '../../platform/crypto/index.js';
import type { AuditNote, ClientCall, ClientSession, ClientSessions } from '../client/index.js';
import type { LicenseHost } from './license-host.js';
import type { AuditRepository } from '../audit/index.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { HeartbeatGateway } from '../heartbeat/index.js';
import { Lockout } from '../../platform/limits/lockout.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import type { Image, ScreenshotStore } from './screenshots.js';
import { alertReasons, type ActivationGeo, type Sighting } from '../geo/index.js';
import type {
  DeviceHolderKind,
  DeviceRepository,
  EndUserRepository,
  KeyTouchesRepository,
  LicenseOpsRepository,
} from '../keys/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { TrialRepository } from './trial.repository.js';

const MAX_PASSWORD_BYTES = 72;

export interface ActivationDeps {
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
  /** The active response-signing key: offline license files are signed with it (docs/protocol.md 12.5). */
  signing: () => ResponseSigningKey;
  /** The client lockouts, when another sign-in shares them (else this service's own). */
  lockout?: Lockout;
}

/** A client call of one of the use cases; the helpers they share. */
export class ActivationCalls {
  constructor(protected readonly d: ActivationDeps) {}

  protected auth<B>(call: ClientCall<B>) {
    if (!call.session) throw new AppError('session_invalid');
    return { app: call.app.row, session: call.session };
  }

  /** docs/protocol.md 2: the first auth call on a fresh session is free; later ones need a live heartbeat. */
  protected async requireHeartbeat<B>(call: ClientCall<B>): Promise<void> {
    if (!call.app.row.require_heartbeat || !call.session) return;
    if (!this.d.sessions.isActivated(call.session.record)) return;
    if (!(await this.d.heartbeats.isAlive(call.session.token))) throw new AppError('heartbeat_required');
  }

  /** Records a device (docs/protocol.md 12.1); false when hwid_lock is on and the holder has no place left. */
  protected async admitDevice(
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
    // The activation's own webhook says new_device (docs/spec.md's alert webhook): no second webhook here.
    if (a.isNew && o.announce !== false) await this.deviceAdded(app.id, kind, id, hwid, o.resellerId, o.data, false);
    return true;
  }

  /**
   * A device added to a key or an end user: audit and live event `device.add`, and the webhook
   * `device.add` where no activation webhook (which carries new_device) announces it.
   */
  protected async deviceAdded(
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

  /**
   * After a successful activation: a warning `client.alert` audit line when it came from a new device
   * or a new location (docs/spec.md "Alert webhook" rule 1), and the activation webhook, which carries the
   * location and says which alert, if any, it is.
   */
  protected announce(
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
  protected async keepScreenshot(
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
}

/** A session's response key; records stored before sealed tokens kept the enc_key itself. */
export function responseKeyOf(s: ClientSession, apiSecret: string): Buffer | null {
  return typeof s.encKey === 'string' ? responseEncryptionKey(s.encKey, apiSecret) : s.encKey;
}

/** Control characters and the bidirectional overrides and isolates that make a name read as another. */
const UNSAFE_NAME = /[\p{Cc}\u200E\u200F\u061C\u202A-\u202E\u2066-\u2069]/u;

/**
 * docs/protocol.md 11.28: end-user names are stored in NFC, so a composed and a decomposed `Åsa` are one
 * name; a name with control or bidirectional-override characters is refused.
 */
export function endUserName(raw: string): string {
  if (UNSAFE_NAME.test(raw))
    throw validationError('username', 'Username must not contain control or bidirectional characters', 'value_error');
  return raw.normalize('NFC');
}

export function assertPasswordBytes(password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw validationError('password', `Password must be at most ${MAX_PASSWORD_BYTES} UTF-8 bytes`, 'string_too_long');
  }
}
