// API shapes (snake_case, ISO timestamps) of keys and end users, as the caller may see them.
import type { Principal } from '../access/index.js';
import { sightOf, visible } from '../access/index.js';
import { toDate } from '../../platform/db/sql.js';
import type { LicenseRow } from './license.repository.js';
import type { UserRow } from './key-admin.repository.js';
import { computedStatus } from './license-status.js';

const isoOrNull = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

/** A key row as the caller may see it (access/visibility.ts: one rule for every channel). */
export function hiddenLicenseView(p: Principal, r: LicenseRow, now: number, liveSessions = 0) {
  return visible(sightOf(p), licenseView(r, now, undefined, liveSessions));
}

export function licenseView(r: LicenseRow, now: number, plaintext?: string, liveSessions = 0) {
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
    max_sessions: r.max_sessions ?? null,
    live_sessions: liveSessions,
    max_devices: r.max_devices ?? null,
    entitlements: r.entitlements ?? [],
    devices: r.devices ?? [],
  };
}

/** A user row as the caller may see it (access/visibility.ts: one rule for every channel). */
export function userView(p: Principal, u: UserRow) {
  const iso = (d: Date | string | null) => toDate(d)?.toISOString() ?? null;
  return visible(sightOf(p), {
    id: u.id,
    app_id: u.app_id,
    username: u.username,
    created_at: iso(u.created_at),
    last_login: iso(u.last_login),
    level: u.level,
    expires_at: iso(u.expires_at),
    banned: u.banned,
    license_id: u.license_id,
    ...(u.key_preview !== undefined ? { key_preview: u.key_preview } : {}),
    reseller_id: u.reseller_id,
    hwid: u.hwid,
    known_hwids: u.known_hwids,
    ip: u.ip,
    known_countries: u.known_countries,
    last_geo: u.last_geo,
    geo: u.geo,
    activation_geo: u.activation_geo,
    last_screenshot_path: u.last_screenshot_path,
    activation_screenshot_path: u.activation_screenshot_path,
    screenshot_path: u.screenshot_path,
    devices: u.devices ?? [],
  });
}
