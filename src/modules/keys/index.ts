// The keys module's public surface: license keys and end users on the dashboard.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Sql } from '../../platform/db/sql.js';
import type { Router } from '../../platform/http/router.js';
import type { AccountRepository, DashboardAuth, Principal } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import { BeatCountsRepository } from './beat-counts.repository.js';
import { CustomerRepository } from './customer.repository.js';
import { DeviceRepository } from './device.repository.js';
import { EndUserRepository } from './end-user.repository.js';
import { KeyGenerator } from './generate.service.js';
import { KeyAdminRepository } from './key-admin.repository.js';
import { KeyRecordsRepository } from './key-records.repository.js';
import { KeyTouchesRepository } from './key-touches.repository.js';
import { LicenseOpsRepository } from './license-ops.repository.js';
import { LicenseRepository } from './license.repository.js';
import { SightingsRepository } from './sightings.repository.js';
import { keysRoutes } from './keys.routes.js';
import { KeysAdminService, type OfflineIssuer } from './keys.service.js';

export { checkedCodes, settleKeySpec } from './generate.service.js';
export { graceField } from './grace.js';
export { DEFAULT_ALPHABET, durationMs, expandMask, keyPreview, licenseHash } from './license-keys.js';
export { computedStatus, hasExpired } from './license-status.js';
export type { EndUserRow } from './customer.repository.js';
export type { DeviceFacts, DeviceHolderKind } from './device.repository.js';
export type { StoredKey } from './license-ops.repository.js';
export type { LicenseRow } from './license.repository.js';
export type {
  CustomerRepository,
  DeviceRepository,
  EndUserRepository,
  KeyGenerator,
  KeyTouchesRepository,
  LicenseOpsRepository,
};

/** A key as the caller may see it (404 outside its apps and scope), and the caller's reseller scope. */
export type KeyLookup = Pick<KeysAdminService, 'license' | 'scope'>;

type ExtendUnit = Parameters<KeysAdminService['extend']>[3];

interface KeysDeps {
  sql: Sql;
  log: Logger;
  now: () => number;
  audit: AuditRepository;
  accounts: Pick<AccountRepository, 'subtreeIds'>;
  /** The apps module's service (visibility, settings, entitlement catalogue). */
  apps: ConstructorParameters<typeof KeysAdminService>[2];
  events: EventBus;
  webhooks: Pick<WebhookService, 'notify'>;
  /** LICENSE_HASH_KEY. */
  licenseHashKey: Buffer;
  /** The activation module's offline files (a port compose.ts fills). */
  offline: OfflineIssuer;
}

/** What the dashboard's key pages need besides the keys module. */
interface KeysRouteDeps {
  auth: DashboardAuth;
  liveSessions: (appId: string) => number;
  liveSeats: (licenseIds: readonly string[]) => Promise<Map<string, number>>;
}

/**
 * Builds the keys module. It owns license_keys, end_users and the devices bound to them
 * (key_devices, user_devices): every other module reads and writes them through this handle.
 */
export function createKeys(d: KeysDeps) {
  const licenses = new LicenseRepository(d.sql);
  /** Last login and IP of activated keys, written behind the answer. */
  const touches = new KeyTouchesRepository(d.sql, d.log);
  const devices = new DeviceRepository(d.sql);
  const admin = new KeysAdminService(
    {
      audit: d.audit,
      accounts: d.accounts,
      licenseHashKey: d.licenseHashKey,
      now: d.now,
      devices,
      offline: d.offline,
      webhooks: d.webhooks,
    },
    new KeyAdminRepository(d.sql, touches),
    d.apps,
    d.events,
  );
  const generator = new KeyGenerator({
    apps: d.apps,
    licenses,
    audit: d.audit,
    events: d.events,
    licenseHashKey: d.licenseHashKey,
    now: d.now,
  });
  return {
    licenses,
    touches,
    devices,
    users: new EndUserRepository(d.sql),
    licenseOps: new LicenseOpsRepository(d.sql),
    /** What other modules ask about an application's keys and users (counts, a record's app, previews). */
    records: new KeyRecordsRepository(d.sql),
    /** A customer's own key and end user (the portal). */
    customers: new CustomerRepository(d.sql),
    /** Accepted beats per application, reseller and hour (the heartbeat module's flushes). */
    beats: new BeatCountsRepository(d.sql),
    /** Where keys and users were seen (the geo module's records). */
    sightings: new SightingsRepository(d.sql),
    generator,
    /** The keys a bulk job acts on and the single actions it applies (the jobs module's port). */
    bulk: {
      matching: (...a: Parameters<KeysAdminService['matchingLicenses']>) => admin.matchingLicenses(...a),
      extend: (p: Principal, id: string, x: { value: number; unit: ExtendUnit; subtract?: boolean | undefined }) =>
        admin.extend(p, id, x.value, x.unit, x.subtract ?? false),
      setBanned: (p: Principal, id: string, banned: boolean) => admin.banLicense(p, id, banned),
      remove: (p: Principal, id: string) => admin.deleteLicense(p, id),
      resetHwid: (p: Principal, id: string) => admin.resetLicenseHwid(p, id),
    },
    /** Scoped lookups for modules acting on one key (air-gapped activation, seat pools). */
    lookup: { license: (p: Principal, id: string) => admin.license(p, id), scope: (p: Principal) => admin.scope(p) },
    mount(router: Router, r: KeysRouteDeps): void {
      keysRoutes(router, { ...r, keys: admin, generator, now: d.now });
    },
    /** Writes the touches still queued (after the last request, before the pool closes). */
    close: () => touches.close(),
  };
}
