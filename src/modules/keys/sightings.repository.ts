// Where end users and license keys were used from (docs/spec.md activation geo, last_geo, known_countries):
// the geo module decides, the keys module stores.
// Each write is one statement that also returns the countries known before it, so the "new
// location" alert compares against what was stored, even with two logins racing (the row lock of
// the first makes the second read its result).
import type { Sql } from '../../platform/db/sql.js';

/** A geo object as stored (docs/spec.md: ip, city, region, country, lat, lon); stored as JSON. */
interface StoredGeo {
  readonly country: string;
}

export class SightingsRepository {
  constructor(private readonly sql: Sql) {}

  /**
   * A successful register (`activation`) or login of a user from `geo`: last_geo and geo become it,
   * activation_geo too on register, and its country joins known_countries. Returns the countries
   * known before, or undefined when the user is gone.
   */
  async recordUser(userId: string, geo: StoredGeo, activation: boolean): Promise<string[] | undefined> {
    const row = await this.sql.one<{ before: string[] }>(
      `with old as (select id, known_countries from end_users where id = ? for update)
       update end_users u set last_geo = ?::jsonb, geo = ?::jsonb,
         activation_geo = case when ? then ?::jsonb else u.activation_geo end,
         known_countries = case when u.known_countries @> jsonb_build_array(?::text) then u.known_countries
                                else u.known_countries || jsonb_build_array(?::text) end
       from old where u.id = old.id
       returning old.known_countries as before`,
      [userId, JSON.stringify(geo), JSON.stringify(geo), activation, JSON.stringify(geo), geo.country, geo.country],
    );
    return row?.before;
  }

  /**
   * A key activated or used from `geo`: its first such use sets activation_geo, every use last_geo,
   * and the country joins the key's known_countries. Returns the countries known before.
   */
  async recordKey(licenseId: string, geo: StoredGeo): Promise<string[] | undefined> {
    const row = await this.sql.one<{ before: string[] }>(
      `with old as (select id, known_countries from license_keys where id = ? for update)
       update license_keys k set last_geo = ?::jsonb, activation_geo = coalesce(k.activation_geo, ?::jsonb),
         known_countries = case when k.known_countries @> jsonb_build_array(?::text) then k.known_countries
                                else k.known_countries || jsonb_build_array(?::text) end
       from old where k.id = old.id
       returning old.known_countries as before`,
      [licenseId, JSON.stringify(geo), JSON.stringify(geo), geo.country, geo.country],
    );
    return row?.before;
  }
}
