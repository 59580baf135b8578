// API shapes (snake_case, ISO timestamps) of stored records, with role-based hiding applied here.
import type { Application, BlacklistEntry } from '../../platform/db/entities/index.js';
import type { AuditRow } from '../audit/audit.repository.js';
import type { LicenseRow } from '../keys/license.repository.js';
import type { Principal } from '../access/principal.js';
import { sightOf, visible } from '../access/visibility.js';
import { computedStatus } from '../keys/license-status.js';
import { beatInterval } from './apps.service.js';

const isoOrNull = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

export function appView(a: Application, p: Principal, stats?: { keys: number; users: number }) {
  return {
    id: a.id,
    name: a.name,
    version: a.version,
    description: a.description,
    enabled: a.enabled,
    disabled_message: a.disabledMessage,
    keys_paused: a.keysPaused,
    hwid_lock: a.hwidLock,
    require_signature: a.requireSignature,
    injection_detection: a.injectionDetection,
    require_heartbeat: a.requireHeartbeat,
    force_update: a.forceUpdate,
    update_url: a.updateUrl,
    update_message: a.updateMessage,
    force_encryption: a.forceEncryption,
    hash_check: a.hashCheck,
    expected_binary_hash: a.expectedBinaryHash,
    webhook: a.webhook,
    key_costs: a.keyCosts,
    allowed_hashes: a.allowedHashes,
    heartbeat_interval: a.heartbeatInterval,
    beat_interval: beatInterval(a.heartbeatInterval),
    api_key: a.apiKey,
    // SPEC: api_secret is hidden from resellers.
    ...(p.role === 'reseller' ? {} : { api_secret: a.apiSecret }),
    owner_id: a.ownerId,
    created_at: a.createdAt.toISOString(),
    updated_at: a.updatedAt.toISOString(),
    ...(stats ? { stats } : {}),
  };
}

/** A key row as the caller may see it (access/visibility.ts: one rule for every channel). */
export function hiddenLicenseView(p: Principal, r: LicenseRow, now: number) {
  return visible(sightOf(p), licenseView(r, now));
}

export function licenseView(r: LicenseRow, now: number, plaintext?: string) {
  return {
    id: r.id,
    ...(plaintext !== undefined ? { key: plaintext } : {}),
    key_preview: r.key_preview,
    app_id: r.app_id,
    status: r.status,
    computed_status: computedStatus(r, now),
    used_by: r.used_by,
    hwid: r.hwid,
    ip: r.ip,
    level: r.level,
    duration_value: r.duration_value,
    duration_unit: r.duration_unit,
    duration_days: r.duration_days,
    created_at: isoOrNull(r.created_at),
    last_login: isoOrNull(r.last_login),
    expires_at: isoOrNull(r.expires_at),
    note: r.note,
    reseller_id: r.reseller_id,
    created_by: r.created_by,
    activation_geo: r.activation_geo ?? null,
    last_geo: r.last_geo ?? null,
    known_countries: r.known_countries ?? [],
    screenshot_path: r.screenshot_path ?? '',
  };
}

export function banView(b: BlacklistEntry) {
  return {
    id: b.id,
    app_id: b.appId,
    type: b.type,
    value: b.value,
    created_at: b.createdAt.toISOString(),
    created_by: b.createdBy,
  };
}

/** A log entry as the caller may see it (access/visibility.ts: one rule for every channel). */
export function logView(r: AuditRow, p: Principal) {
  return visible(sightOf(p), {
    id: r.id,
    time: new Date(r.at).toISOString(),
    level: r.level,
    action: r.action,
    detail: r.detail,
    ip: r.ip,
    location: r.location,
    screen: r.screen,
    actor_id: r.actor_id,
  });
}
