// Geo of successful activations (docs/spec.md "End user" geo fields and known_countries, "Alert webhook"
// rule 1): looks the caller's address up, stores it on the user or key, and says whether the
// country is new for that record. A failure here never fails the activation it follows: the
// activation already happened, so it is logged and the call answers as if the address were unknown.
import type { Logger } from 'pino';
import { locationText, type Geo, type GeoLocator } from './geo.js';

export interface Sighting {
  geo: Geo | null;
  /** "City, Region, CC", or '' when the address did not resolve. */
  location: string;
  /** A country this user (or key) had not been used from, while it had been used from some before. */
  newLocation: boolean;
}

/** Why an activation is an alert (docs/spec.md: "a key is used from a new device or new location"). */
type AlertReason = 'new_device' | 'new_location';

export function alertReasons(newDevice: boolean, newLocation: boolean): AlertReason[] {
  return [...(newDevice ? ['new_device' as const] : []), ...(newLocation ? ['new_location' as const] : [])];
}

const NOWHERE: Sighting = { geo: null, location: '', newLocation: false };

/**
 * Where keys and users were seen, stored by the keys module (a port compose.ts fills). Each write
 * returns the countries known before it (undefined: the record is gone).
 */
interface SightingRecords {
  recordUser(userId: string, geo: { country: string }, activation: boolean): Promise<string[] | undefined>;
  recordKey(licenseId: string, geo: { country: string }): Promise<string[] | undefined>;
}

export class ActivationGeo {
  constructor(private readonly d: { locator: GeoLocator; records: SightingRecords; log: Logger }) {}

  /** register (`licenseId` given: the key's activation geo too) or login of an end user. */
  async user(ip: string, userId: string, register: { licenseId: string } | null): Promise<Sighting> {
    return this.observe(ip, async (geo) => {
      const before = await this.d.records.recordUser(userId, geo, register !== null);
      if (register) await this.d.records.recordKey(register.licenseId, geo);
      return before;
    });
  }

  /** license-only activation or use of a key. */
  async key(ip: string, licenseId: string): Promise<Sighting> {
    return this.observe(ip, (geo) => this.d.records.recordKey(licenseId, geo));
  }

  private async observe(ip: string, record: (geo: Geo) => Promise<string[] | undefined>): Promise<Sighting> {
    try {
      const geo = await this.d.locator.lookup(ip);
      if (!geo) return NOWHERE;
      const before = await record(geo);
      // The first country ever seen is the baseline (like the first HWID), not a new location.
      const newLocation = before !== undefined && before.length > 0 && !before.includes(geo.country);
      return { geo, location: locationText(geo), newLocation };
    } catch (err) {
      this.d.log.warn({ err }, 'geo.record_failed');
      return NOWHERE;
    }
  }
}
