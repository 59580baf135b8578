// The activation module's public surface: init, register, login, license: sessions activated by keys and end users.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { ShardNode } from '../../platform/cluster/cluster-node.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Lockout } from '../../platform/limits/lockout.js';
import type { Router } from '../../platform/http/router.js';
import type { AuditRepository } from '../audit/index.js';
import type { ClientDeps, ClientSessions, RequestLimiterFactory } from '../client/index.js';
import type { ActivationGeo } from '../geo/index.js';
import type { HeartbeatGateway } from '../heartbeat/index.js';
import type { DeviceRepository, EndUserRepository, KeyTouchesRepository, LicenseOpsRepository } from '../keys/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import { activationRoutes } from './activation.routes.js';
import { ActivationService, clientLockout } from './activation.service.js';
import { licenseEffects } from './license-effects.js';
import { LicenseHost } from './license-host.js';
import { type LicenseOps, routeLicenses } from './license-routing.js';
import { ScreenshotRepository } from './screenshot.repository.js';
import { ScreenshotStore } from './screenshots.js';
import { TrialRepository } from './trial.repository.js';

export type { ActivationService, LicenseOps };

interface ActivationDeps {
  sql: Sql;
  log: Logger;
  now: () => number;
  coordinator: Coordinator;
  node: ShardNode<LicenseOps>;
  sessions: ClientSessions;
  heartbeats: Pick<HeartbeatGateway, 'isAlive'>;
  audit: AuditRepository;
  events: EventBus;
  webhooks: WebhookService;
  geo: ActivationGeo;
  /** The keys module's stores: keys, end users, their devices, last touches. */
  keys: {
    licenseOps: LicenseOpsRepository;
    users: EndUserRepository;
    devices: DeviceRepository;
    touches: KeyTouchesRepository;
    records: ConstructorParameters<typeof TrialRepository>[1];
  };
  licenseHashKey: Buffer;
  signing: () => ResponseSigningKey;
  dataDir: string;
  /** SCREENSHOT_STORE_MB in bytes. */
  screenshotStoreBytes: number;
  /** FAULT_AFTER_CLAIM_MS (a test hook). */
  faultAfterClaimMs: number | undefined;
}

/** Builds the activation module: the license-key actors, the activation service, trials and screenshots. */
export function createActivation(d: ActivationDeps) {
  const { now, log } = d;
  const licenses = new LicenseHost(
    licenseEffects(d.keys.licenseOps, d.keys.touches, { now, afterClaimMs: d.faultAfterClaimMs }),
    { log, now },
  );
  /** Failed client calls per address and name (shared with the portal's sign-in). */
  const lockout: Lockout = clientLockout(d.coordinator);
  const service = new ActivationService({
    lockout,
    now,
    coordinator: d.coordinator,
    sessions: d.sessions,
    heartbeats: d.heartbeats,
    licenses: routeLicenses(d.node, licenses),
    licenseOps: d.keys.licenseOps,
    users: d.keys.users,
    audit: d.audit,
    licenseHashKey: d.licenseHashKey,
    events: d.events,
    webhooks: d.webhooks,
    screenshots: new ScreenshotStore(d.dataDir, new ScreenshotRepository(d.sql), log, d.screenshotStoreBytes, now),
    geo: d.geo,
    devices: d.keys.devices,
    touches: d.keys.touches,
    trials: new TrialRepository(d.sql, d.keys.records),
    signing: d.signing,
  });
  return {
    service,
    lockout,
    /** License-key actors live on this worker. */
    licenses,
    mount(router: Router, gate: ClientDeps, limit: RequestLimiterFactory): void {
      activationRoutes(router, { gate, activation: service, limit });
    },
    /**
     * Keys a dead process left pending. One process alone (no Redis) cannot race a live claim:
     * every pending key; with other workers around, only claims older than any live register.
     */
    recoverPending: () =>
      d.keys.licenseOps.recoverPending(new Date(now() - (d.coordinator.kind === 'local' ? 0 : 60_000))),
    close: () => licenses.close(),
  };
}
