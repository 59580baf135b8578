// Air-gapped machines (docs/air-gapped.md): activation requests answered by file on the dashboard and
// the portal, and seat pools for `keywarden relay`. Keys and devices are touched only through the
// activation service (the same actor and checks as the client's `license`) and the keys module's
// scoped lookup; this module keeps no table of its own.
import { AppError, validationError } from '../../errors.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import { toDate } from '../../platform/db/sql.js';
import { actorOf, keysPolicy, type Principal } from '../access/index.js';
import type { ActivationService } from '../activation/index.js';
import type { AppsService } from '../apps/index.js';
import type { AuditRepository } from '../audit/index.js';
import { normalizeHwid, type CachedApp } from '../client/index.js';
import { computedStatus, durationMs, type KeyLookup } from '../keys/index.js';
import type { EventBus } from '../notify/index.js';
import { signPool } from './pool-file.js';
import { parseActivationRequest } from './request-file.js';

const DAY_MS = 86_400_000;

export interface AirgapDeps {
  apps: Pick<AppsService, 'visible'>;
  /** The application as the client API sees it (fields, HWID blacklist); null when it is gone. */
  clientApp: (appId: string) => Promise<CachedApp | null>;
  activation: Pick<ActivationService, 'offlineActivation'>;
  /** The keys module's scoped lookups. */
  keys: KeyLookup;
  audit: AuditRepository;
  events: Pick<EventBus, 'publish'>;
  signing: () => ResponseSigningKey;
  now: () => number;
}

interface Answered {
  file: string;
  licenseId: string;
  resellerId: string | null;
  days: number;
  hwid: string;
}

interface PoolInput {
  seats: number;
  valid_days: number;
  relay_id: string;
}

export class AirgapService {
  constructor(private readonly d: AirgapDeps) {}

  /** Owners, admins, developers; resellers with generate_keys, for keys in their scope. */
  async answerForDashboard(p: Principal, appId: string, request: string, ip: string): Promise<{ response: string }> {
    keysPolicy.assertEdit(p);
    await this.d.apps.visible(p, appId);
    const scope = await this.d.keys.scope(p);
    // A key outside the caller's scope reads as unknown: no probing of other resellers' keys.
    const a = await this.answer(appId, request, ip, (k) => {
      if (scope !== undefined && (k.resellerId === null || !scope.includes(k.resellerId)))
        throw new AppError('license_invalid');
    });
    this.d.audit.write({
      appId,
      action: 'license.offline_activation',
      detail: `Offline activation answered for a request (${a.days} days)`,
      actor: actorOf(p),
      resellerId: a.resellerId,
    });
    await this.d.events.publish(
      'license.offline_activation',
      appId,
      { license_id: a.licenseId, hwid: a.hwid, days: a.days },
      a.resellerId,
    );
    return { response: a.file };
  }

  /** The portal customer's own key only; another key's request is refused as naming another license. */
  async answerForPortal(
    s: { app_id: string; license_id: string },
    request: string,
    ip: string,
  ): Promise<{ response: string }> {
    const a = await this.answer(s.app_id, request, ip, (k) => {
      if (k.id !== s.license_id) throw validationError('request', 'The request is for another license key');
    });
    this.d.audit.write({
      appId: s.app_id,
      action: 'license.offline_activation',
      detail: `Customer answered an offline activation request in the portal (${a.days} days)`,
      resellerId: a.resellerId,
      ip,
    });
    await this.d.events.publish(
      'license.offline_activation',
      s.app_id,
      { license_id: a.licenseId, hwid: a.hwid, days: a.days, by: 'portal' },
      a.resellerId,
    );
    return { response: a.file };
  }

  /** In `license`'s order: blacklisted HWID, disabled app, then the key's own checks. */
  private async answer(
    appId: string,
    request: string,
    ip: string,
    admit: (k: { id: string; resellerId: string | null }) => void,
  ): Promise<Answered> {
    const req = parseActivationRequest(request);
    if (req.appId.toLowerCase() !== appId.toLowerCase())
      throw validationError('request', 'The request is for another application');
    const app = await this.d.clientApp(appId);
    if (!app) throw new AppError('app_not_found');
    const hwid = normalizeHwid(req.hwid);
    if (app.blockedHwids.has(hwid)) throw new AppError('access_denied');
    const row = app.row;
    if (!row.enabled) throw new AppError('app_disabled', row.disabled_message || undefined);
    const r = await this.d.activation.offlineActivation(
      {
        id: row.id,
        hwidLock: row.hwid_lock,
        maxDevices: row.max_devices,
        offlineDays: row.offline_days,
        keysPaused: row.keys_paused,
      },
      { key: req.key, hwid, nonce: req.nonce, ip },
      admit,
    );
    return { ...r, hwid };
  }

  /** A signed seat pool for a relay (owners, admins, developers); audit `license.pool`. */
  async issuePool(p: Principal, licenseId: string, input: PoolInput): Promise<{ pool: string }> {
    keysPolicy.assertPool(p);
    const { row } = await this.d.keys.license(p, licenseId);
    const now = this.d.now();
    const status = computedStatus(row, now);
    if (status === 'banned') throw new AppError('license_banned');
    if (status === 'expired') throw new AppError('license_expired');
    // An unactivated key is not stamped by a pool: its pool ends where the key would if activated now.
    const ms = durationMs(row.duration_value, row.duration_unit);
    const expiresAt = row.duration_days === 0 || ms === null ? null : (toDate(row.expires_at) ?? new Date(now + ms));
    const limit = now + input.valid_days * DAY_MS;
    const validUntil = expiresAt && expiresAt.getTime() < limit ? expiresAt.getTime() : limit;
    const key = this.d.signing();
    const pool = signPool(key.kid, key.secretKey, {
      app_id: row.app_id,
      license_id: row.id,
      relay_id: input.relay_id,
      seats: input.seats,
      level: row.level,
      entitlements: row.entitlements,
      expires_at: expiresAt?.toISOString() ?? null,
      valid_until: new Date(validUntil).toISOString(),
      issued_at: new Date(now).toISOString(),
    });
    this.d.audit.write({
      appId: row.app_id,
      action: 'license.pool',
      detail: `Seat pool of ${input.seats} issued for key ${row.key_preview} to relay ${input.relay_id}`,
      actor: actorOf(p),
      resellerId: row.reseller_id,
    });
    await this.d.events.publish(
      'license.pool',
      row.app_id,
      {
        license_id: row.id,
        relay_id: input.relay_id,
        seats: input.seats,
        valid_until: new Date(validUntil).toISOString(),
      },
      row.reseller_id,
    );
    return { pool };
  }
}
