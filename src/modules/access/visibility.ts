// What a caller may see of a record (docs/spec.md "Reseller scoping and hiding" rules 2-4, docs/protocol.md 11.17),
// written once for every channel that shows records: the dashboard's key, user and log listings,
// webhook payloads and live events. A new sensitive field is added to one of the lists below and
// is hidden everywhere at once. A hidden field is absent, never "" or null.
import type { Permissions } from '../../platform/db/entities/index.js';
import type { Principal, Role } from './principal.js';

/** What a caller may see: HWIDs (view_hwid) and addresses with what is derived from them (view_ip). */
export interface Sight {
  readonly hwid: boolean;
  readonly ip: boolean;
}

export const FULL_SIGHT: Sight = { hwid: true, ip: true };

/** Owners, admins and developers see everything; a reseller what its permissions grant. */
export function sightOfAccount(role: Role, permissions: Partial<Permissions> | null | undefined): Sight {
  if (role !== 'reseller') return FULL_SIGHT;
  return { hwid: permissions?.view_hwid === true, ip: permissions?.view_ip === true };
}

export function sightOf(p: Principal): Sight {
  return sightOfAccount(p.role, p.account.permissions);
}

/** Without view_hwid (a key's or user's `devices` list names its HWIDs). */
const HWID_FIELDS = ['hwid', 'known_hwids', 'devices'];
/** Without view_ip: the address and everything derived from it. */
const IP_FIELDS = ['ip', 'location', 'known_countries', 'city', 'region', 'country', 'lat', 'lon'];
/**
 * Geo objects stay, without the fields derived from the address (docs/spec.md "Reseller scoping and hiding" rule 3).
 */
const GEO_OBJECTS = ['geo', 'last_geo', 'activation_geo'];
const GEO_IP_FIELDS = ['ip', 'city', 'region', 'country', 'lat', 'lon'];
/** A screenshot shows the machine and where it is: it needs both permissions. */
const SCREENSHOT_FIELDS = [
  'screenshot',
  'screenshot_path',
  'last_screenshot_path',
  'activation_screenshot_path',
  'screen',
];
/** Free text that may quote an address: IP-shaped substrings are removed without view_ip. */
const TEXT_FIELDS = ['detail'];

const IPV4 = /\b(?:\d{1,3}\.){3}\d{1,3}\b/g;
const IPV6 = /\b(?:[0-9a-f]{1,4}:){2,7}[0-9a-f]{0,4}\b|::(?:ffff:)?[0-9a-f.:]+/gi;

/** docs/spec.md "Reseller scoping and hiding" rule 3: IP-shaped substrings are removed from text. */
function stripIps(text: string): string {
  return text.replace(IPV4, '').replace(IPV6, '');
}

/** The record as `sight` may see it: hidden fields removed, geo objects and free text reduced. */
export function visible<T extends object>(sight: Sight, record: T): Partial<T> {
  if (sight.hwid && sight.ip) return record;
  const out = { ...record } as Record<string, unknown>;
  if (!sight.hwid) for (const k of HWID_FIELDS) delete out[k];
  if (!sight.ip) {
    for (const k of IP_FIELDS) delete out[k];
    for (const k of GEO_OBJECTS) {
      const g = out[k];
      if (g && typeof g === 'object') {
        const rest: Record<string, unknown> = { ...(g as Record<string, unknown>) };
        for (const f of GEO_IP_FIELDS) delete rest[f];
        out[k] = rest;
      }
    }
    for (const k of TEXT_FIELDS) if (typeof out[k] === 'string') out[k] = stripIps(out[k]);
  }
  if (!sight.hwid || !sight.ip) for (const k of SCREENSHOT_FIELDS) delete out[k];
  return out as Partial<T>;
}

/** The columns of an export the caller may see: a hidden field's column is absent (docs/protocol.md 15.5). */
export function visibleColumns(sight: Sight, columns: readonly string[]): string[] {
  const seen = visible(sight, Object.fromEntries(columns.map((c) => [c, ''])));
  return columns.filter((c) => c in seen);
}
