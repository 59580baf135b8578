// Whether an application admits a client now (docs/protocol.md "Endpoints and the gate"): its IP and
// HWID blacklists, then whether it is enabled, in that order. The REST gate (client-gate.ts) refuses
// a call with it and the realtime channel refuses an upgrade and revokes an open connection with it,
// so a ban means the same on every transport.
import type { CachedApp } from './client-app-cache.js';
import { normalizeHwid } from './hwid.js';

/** Why the app refuses the client: `blacklisted` (its IP or its device) or `app_disabled`. */
type Refusal = 'blacklisted' | 'app_disabled';

export interface Admittee {
  ip: string;
  /** The client's device: a call's `hwid`, or the one its session was activated from; absent: unknown. */
  hwid?: string | null | undefined;
}

/** The refusal, or null when the app admits the client. */
export function refusalOf(app: CachedApp, client: Admittee): Refusal | null {
  if (app.blockedIps.has(client.ip)) return 'blacklisted';
  if (client.hwid && app.blockedHwids.has(normalizeHwid(client.hwid))) return 'blacklisted';
  if (!app.row.enabled) return 'app_disabled';
  return null;
}
