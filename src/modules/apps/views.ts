// API shapes (snake_case, ISO timestamps) of stored records, with role-based hiding applied here.
import type { Application, BlacklistEntry } from '../../platform/db/entities/index.js';
import type { AuditRow } from '../audit/audit.repository.js';
import type { LicenseRow } from '../keys/license.repository.js';
import { hasPermission, type Principal } from '../access/principal.js';
import { beatInterval, stripIps } from './apps.service.js';
import { GEO_IP_FIELDS } from '../geo/geo.js';

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

function licenseStatus(r: LicenseRow, now: number): 'active' | 'banned' | 'unactivated' | 'expired' {
  if (r.status === 'banned') return 'banned';
  if (r.status === 'unused' || (r.status === 'pending' && !r.used_by)) return 'unactivated';
  if (r.expires_at && r.duration_unit !== 'lifetime' && r.duration_days !== 0 && new Date(r.expires_at).getTime() < now)
    return 'expired';
  return 'active';
}

/** SPEC hiding rule 3 for a geo object: without view_ip it keeps none of ip, city, region, country, lat, lon. */
export function geoWithoutIp(g: Record<string, unknown> | null): Record<string, unknown> | null {
  if (!g) return g;
  const rest = { ...g };
  for (const k of GEO_IP_FIELDS) delete rest[k];
  return rest;
}

/**
 * SPEC hiding rules 2-4 for key rows: no hwid without view_hwid; no ip, known_countries or geo
 * fields without view_ip; no screenshot path without both (PROTOCOL 11.17). Hidden means absent.
 */
export function hiddenLicenseView(p: Principal, r: LicenseRow, now: number) {
  const v: Partial<ReturnType<typeof licenseView>> = licenseView(r, now);
  const hwid = hasPermission(p, 'view_hwid');
  const ip = hasPermission(p, 'view_ip');
  if (!hwid) delete v.hwid;
  if (!ip) {
    delete v.ip;
    delete v.known_countries;
    v.activation_geo = geoWithoutIp(r.activation_geo);
    v.last_geo = geoWithoutIp(r.last_geo);
  }
  if (!hwid || !ip) delete v.screenshot_path;
  return v;
}

export function licenseView(r: LicenseRow, now: number, plaintext?: string) {
  return {
    id: r.id,
    ...(plaintext !== undefined ? { key: plaintext } : {}),
    key_preview: r.key_preview,
    app_id: r.app_id,
    status: r.status,
    computed_status: licenseStatus(r, now),
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

/**
 * SPEC hiding for log entries: without view_ip no ip, no location and no IP-shaped text in detail;
 * the screenshot (`screen`) needs view_hwid and view_ip (PROTOCOL 11.17). Hidden fields are absent.
 */
export function logView(r: AuditRow, p: Principal) {
  const ip = hasPermission(p, 'view_ip');
  const hwid = hasPermission(p, 'view_hwid');
  return {
    id: r.id,
    time: new Date(r.at).toISOString(),
    level: r.level,
    action: r.action,
    detail: ip ? r.detail : stripIps(r.detail),
    ...(ip ? { ip: r.ip, location: r.location } : {}),
    ...(ip && hwid ? { screen: r.screen } : {}),
    actor_id: r.actor_id,
  };
}
