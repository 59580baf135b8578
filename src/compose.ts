// The composition root: the one place that builds the modules and wires them together (docs/architecture.md "House
// practices" 8, 9). services.ts opens what a worker needs (database, coordination, secrets, the audit writer);
// createDomain calls each module's create<Module> in the declared module order and fills the ports
// one module offers another; app.ts mounts their routes on uWebSockets.js. Nothing here listens:
// main.ts does.
import { ProcessStateRepository } from './platform/db/process-state.repository.js';
import { StateCheckpoint } from './platform/db/state-checkpoint.js';
import { LocalCoordinator } from './platform/cluster/local.coordinator.js';
import { ClusterNode, clusterNodeOptions, shardOf } from './platform/cluster/cluster-node.js';
import { actorOf, createAccess, overseesAccount, type AccessDeps } from './modules/access/index.js';
import { createActivation, type LicenseOps } from './modules/activation/index.js';
import { createApps } from './modules/apps/index.js';
import { createClient } from './modules/client/index.js';
import { createCommerce } from './modules/commerce/index.js';
import { createGeo } from './modules/geo/index.js';
import { createHeartbeat, type HeartbeatOps } from './modules/heartbeat/index.js';
import { createJobs } from './modules/jobs/index.js';
import { createKeys } from './modules/keys/index.js';
import { createNotify } from './modules/notify/index.js';
import { createPortal } from './modules/portal/index.js';
import { createAirgap } from './modules/airgap/index.js';
import { createRealtime } from './modules/realtime/index.js';
import { createReleases } from './modules/releases/index.js';
import { createTeam } from './modules/team/index.js';
import type { Services } from './services.js';

type ClusterOps = HeartbeatOps & LicenseOps;

/** What sign-in needs; `reach` comes from the modules that own applications and records. */
export function accessDeps(s: Services, reach: AccessDeps['reach']): AccessDeps {
  return {
    orm: s.orm,
    sql: s.sql,
    coordinator: s.coordinator,
    log: s.log,
    now: () => s.clock.now(),
    secrets: s.secrets,
    developerEmails: s.config.developerEmails,
    // CSRF: cookie-authenticated writes may come from the request's own Host or from PUBLIC_URL.
    trustedOrigins: s.config.publicUrl ? [s.config.publicUrl] : [],
    audit: s.audit.repository,
    reach,
  };
}

/** Every module's handle, built in the declared module order (docs/architecture.md "Module map"). */
export function createDomain(s: Services) {
  const now = () => s.clock.now();
  const { log, sql, orm, coordinator, config, secrets } = s;
  const audit = s.audit.repository;
  // With Redis, other workers call this one over a direct, authenticated connection (pub/sub as fallback).
  const node = new ClusterNode<ClusterOps>(coordinator, log, now, clusterNodeOptions(config, coordinator.kind));
  // What most modules take; each factory reads the fields it declares. Later modules are reached
  // through closures (a port is called only after every module is built).
  const base = { sql, orm, log, now, coordinator, audit, node, licenseHashKey: secrets.licenseHashKey };
  const access = createAccess(
    accessDeps(s, {
      reachableApps: (p) => apps.reachableApps(p),
      reachesApp: (p, appId) => apps.reachesApp(p, appId),
      recordApp: (kind, id) =>
        kind === 'release'
          ? releases.appOf(id)
          : kind === 'ban'
            ? apps.appOfBan(id)
            : kind === 'product'
              ? commerce.appOfProduct(id)
              : keys.records.appOf(kind, id),
    }),
  );
  const notify = createNotify({
    ...base,
    allowPrivate: config.allowPrivateWebhooks,
    ...(config.webhookRetryMs ? { retryDelaysMs: config.webhookRetryMs } : {}),
    dataDir: config.dataDir,
    developerEmails: config.developerEmails,
    discordHosts: config.webhookDiscordHosts,
    geoAttribution: s.geo.attribution,
    secretOf: async (accountId) => (await access.accounts.findById(accountId))?.webhookSecret ?? null,
  });
  const ctx = { ...base, events: notify.events, webhooks: notify.webhooks, accounts: access.accounts };
  const client = createClient({
    ...ctx,
    sessionTokenKey: secrets.sessionTokenKey,
    signingKey: () => secrets.signing,
    publishedKeys: () => secrets.publishedKeys,
    sessionLimit: config.clientSessionLimit,
    apps: {
      findForClientByApiKey: (key) => apps.applications.findForClientByApiKey(key),
      findForClientById: (id) => apps.applications.findForClientById(id),
    },
    blacklist: { values: (appId) => apps.blacklist.values(appId) },
    ...(config.affinityRoute === undefined
      ? {}
      : {
          affinity: {
            own: `${config.affinityRoute}-${config.workerIndex}`,
            routeOf: (session: string) => node.routeOf(shardOf(session)),
          },
        }),
  });
  const local = coordinator instanceof LocalCoordinator ? coordinator : undefined;
  const heartbeat = createHeartbeat({
    ...ctx,
    sessions: client.sessions,
    maxLiveActors: config.heartbeatMaxLiveActors,
    checkpointed: local !== undefined,
    keySeats: (licenseId) => keys.licenses.seatPolicy(licenseId),
    // activation is built below; the gateway asks it for a license's grace.
    grace: (app, record) => activation.service.graceForSession(app, record),
    expiring: {
      keys: { expiredBetween: (...a) => keys.licenses.expiredBetween(...a) },
      users: { expiredBetween: (...a) => keys.users.expiredBetween(...a) },
    },
    beatStore: { addBeats: (batch) => keys.beats.addBeats(batch) },
    isLeader: () => node.fenceOf(0) !== undefined,
  });
  const apps = createApps({
    ...ctx,
    appCache: client.appCache,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    keys: {
      counts: (ids, resellerIds) => keys.records.counts(ids, resellerIds),
      keepOnlyEntitlements: (appId, codes, tx) => keys.records.keepOnlyEntitlements(appId, codes, tx),
    },
  });
  const keys = createKeys({
    ...ctx,
    apps: apps.service,
    offline: { offlineForKey: (...a) => activation.service.offlineForKey(...a) },
  });
  const geo = createGeo({ locator: s.geo, records: keys.sightings, log });
  const jobs = createJobs({
    sql,
    keys: keys.bulk,
    audit,
    notify: (accountId, data) => notify.events.publishAccount('job.progress', accountId, data),
    actorOf,
    mayView: (viewer, creatorId) => overseesAccount(viewer, creatorId, (id) => access.accounts.subtreeIds(id)),
    now,
    log,
  });
  const releases = createReleases({
    ...ctx,
    publicUrl: config.publicUrl,
    artifactDir: config.artifactDir,
    maxBytes: config.artifactMaxBytes,
    apps: {
      visible: (p, id) => apps.service.visible(p, id),
      entitlementCodes: (id) => apps.service.entitlementCodes(id),
      expiredUpdates: async (id) => (await client.appCache.getById(id))?.row.expired_updates,
    },
    standing: (holder) => activation.service.licenseStanding(holder),
    signing: () => secrets.signing,
    sessionTokenKey: secrets.sessionTokenKey,
  });
  const activation = createActivation({
    ...ctx,
    sessions: client.sessions,
    heartbeats: heartbeat.gateway,
    geo: geo.activation,
    keys,
    signing: () => secrets.signing,
    dataDir: config.dataDir,
    screenshotStoreBytes: config.screenshotStoreBytes,
    faultAfterClaimMs: config.faultAfterClaimMs,
  });
  const commerce = createCommerce({
    ...ctx,
    apps: apps.service,
    generator: keys.generator,
    previews: (ids) => keys.records.previews(ids),
    sealKey: secrets.sealKey,
  });
  const portal = createPortal({
    ...ctx,
    clearDevices: (licenseId, tx) => keys.customers.clearDevices(licenseId, tx),
    customers: keys.customers,
    apps: apps.applications,
    lockout: activation.lockout,
    liveSessions: async (licenseId) => (await heartbeat.owner.seats.liveCounts([licenseId])).get(licenseId) ?? 0,
    devices: keys.devices,
    offline: activation.service,
  });
  const airgap = createAirgap({
    ...ctx,
    apps: apps.service,
    clientApp: (id) => client.appCache.getById(id),
    activation: activation.service,
    keys: keys.lookup,
    signing: () => secrets.signing,
  });
  const realtime = createRealtime({
    ...ctx,
    appCache: client.appCache,
    sessions: client.sessions,
    heartbeats: heartbeat.gateway,
    owner: heartbeat.owner,
    apps: apps.service,
  });
  const team = createTeam({
    ...ctx,
    repos: { accounts: access.accounts, apps: apps.applications, audit, sessions: access.sessions },
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    developerEmails: config.developerEmails,
    access: access.signal,
    twoFactor: access.auth.twoFactor,
  });
  // One process without Redis: client and heartbeat sessions survive a restart through PostgreSQL.
  const checkpoint = local
    ? new StateCheckpoint(new ProcessStateRepository(sql), [local, heartbeat.owner], {
        log,
        now,
        everyMs: config.stateCheckpointMs,
      })
    : undefined;
  let freezeToggle: (() => void) | undefined;
  return {
    node,
    access,
    notify,
    client,
    heartbeat,
    apps,
    keys,
    jobs,
    releases,
    activation,
    commerce,
    portal,
    airgap,
    realtime,
    team,
    /** Subscriptions, sweepers and the recovery of keys a dead process left pending. */
    async start() {
      await client.start();
      await notify.events.start();
      await access.signal.start();
      await realtime.start();
      await node.start();
      if (config.faultPeerFreeze) {
        // Test hook: SIGUSR2 stops (then resumes) reading what other workers send directly.
        let frozen = false;
        freezeToggle = () => node.freezePeerLinks((frozen = !frozen));
        process.on('SIGUSR2', freezeToggle);
      }
      const restored = await checkpoint?.restore();
      if (restored) log.info({ restored }, 'state.restored');
      // Alone, seat tables live in memory: the restored heartbeat sessions take their seats back.
      if (local) await heartbeat.owner.seats.rebuild(heartbeat.owner.host.contexts());
      checkpoint?.start();
      heartbeat.startTimers();
      commerce.start();
      portal.start();
      client.startPurge();
      const recovered = await activation.recoverPending();
      if (recovered > 0) log.warn({ recovered }, 'license.pending_recovered');
    },
    async stop() {
      client.stopPurge();
      heartbeat.stopWatch();
      if (freezeToggle) process.off('SIGUSR2', freezeToggle);
      commerce.stop();
      portal.stop();
      // Realtime channels end first (1001), so their clients reconnect to a worker that stays.
      await realtime.stop();
      // After the last request: what the sessions are now is what the next start continues from.
      await checkpoint?.stop();
      await notify.webhooks.drain();
      await jobs.drain();
      // Hand every shard back (state is already durable with Redis), then stop answering calls.
      await node.close();
      heartbeat.owner.close();
      // After the last beat: what this worker counted is added before the pool closes.
      await heartbeat.beatCounts.close();
      activation.close();
      await notify.events.stop();
      await access.signal.stop();
      await client.stop();
      // Last logins and IPs still queued are written before the pool closes.
      await keys.close();
    },
  };
}

export type Domain = ReturnType<typeof createDomain>;
