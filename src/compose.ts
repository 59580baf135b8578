// The composition root: the one place that builds the platform pieces and the modules and wires
// them together (STYLE 8, 9). createServices opens what a worker needs (database, coordination,
// secrets); createDomain builds the modules on them; createApp mounts their routes on uWebSockets.js.
// Nothing here listens: main.ts does.
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { systemClock, type Clock } from './clock.js';
import { AppError } from './errors.js';
import { initOrm, migrate, type Orm } from './platform/db/orm.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './platform/db/embedded-postgres.js';
import { Sql } from './platform/db/sql.js';
import { checkDeploymentKeys } from './platform/db/key-fingerprints.js';
import { ProcessStateRepository } from './platform/db/process-state.repository.js';
import { StateCheckpoint } from './platform/db/state-checkpoint.js';
import type { Coordinator } from './platform/cluster/coordinator.js';
import { LocalCoordinator } from './platform/cluster/local.coordinator.js';
import { RedisCoordinator } from './platform/cluster/redis.coordinator.js';
import { ClusterNode, shardOf } from './platform/cluster/cluster-node.js';
import { registerClusterGauges } from './platform/cluster/cluster-gauges.js';
import { loadSecrets, type Secrets } from './platform/crypto/secrets.js';
import { createClientIpResolver } from './platform/http/client-ip.js';
import { signReply } from './platform/http/client-signing.js';
import { errorReply } from './platform/http/error-reply.js';
import { Metrics } from './platform/http/metrics.js';
import { Router } from './platform/http/router.js';
import { mountDashboard } from './platform/http/static.js';
import type { Reply } from './platform/http/types.js';
import { createHttpServer, loadUws, type HttpServer } from './platform/http/uws.js';
import { addressLimiter } from './platform/limits/compact-rate-limiter.js';
import { startMallocTrim, type MallocTrimmer } from './platform/runtime/malloc-trim.js';
import { actorOf, createAccess, overseesAccount, type AccessDeps } from './modules/access/index.js';
import { createActivation, type LicenseOps } from './modules/activation/index.js';
import { createApps } from './modules/apps/index.js';
import { createAudit, type AuditModule } from './modules/audit/index.js';
import { createClient, SESSION_KEY_PREFIX } from './modules/client/index.js';
import { createCommerce } from './modules/commerce/index.js';
import { createGeo, GeoLocator, locationText } from './modules/geo/index.js';
import { createHeartbeat, type HeartbeatOps } from './modules/heartbeat/index.js';
import { createJobs } from './modules/jobs/index.js';
import { createKeys } from './modules/keys/index.js';
import { createNotify, type LiveHub } from './modules/notify/index.js';
import { createPortal } from './modules/portal/index.js';
import { createAirgap } from './modules/airgap/index.js';
import { createRealtime, type ClientChannel } from './modules/realtime/index.js';
import { createSystem } from './modules/system/index.js';
import { createTeam } from './modules/team/index.js';

// ---- platform services ------------------------------------------------------------------------

export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly clock: Clock;
  readonly orm: Orm;
  readonly sql: Sql;
  /** The audit module: every module writes to it; close() flushes what is queued. */
  readonly audit: AuditModule;
  readonly coordinator: Coordinator;
  readonly secrets: Secrets;
  /** GEOIP_DB lookups (activation geo, log locations). */
  readonly geo: GeoLocator;
  /** Gives freed C-heap memory back after full collections (MEMORY_TRIM_MS); null when off or impossible here. */
  readonly memoryTrim: MallocTrimmer | null;
  /** Closes the coordinator, the database pool and (last) the embedded PostgreSQL. Idempotent. */
  close(): Promise<void>;
}

interface ServiceOptions {
  clock?: Clock;
  /** Run migrations on start (true for `serve`; the cluster primary runs them once for all workers). */
  migrate?: boolean;
}

/** One services object, no module singletons: close() releases in reverse order of creation. */
export async function createServices(config: Config, log: Logger, opts: ServiceOptions = {}): Promise<Services> {
  const clock = opts.clock ?? systemClock;
  let embedded: EmbeddedPostgres | undefined;
  let orm: Orm | undefined;
  let coordinator: Coordinator | undefined;
  try {
    if (!config.databaseUrl) embedded = await startEmbeddedPostgres(config.dataDir, log);
    orm = await initOrm({ url: config.databaseUrl ?? embedded!.target, logger: log });
    if (opts.migrate !== false) {
      const applied = await migrate(orm, config.databaseUrl ?? embedded!.target);
      if (applied.length > 0) log.info({ applied }, 'db.migrated');
    }
    const secrets = await loadSecrets(config);
    // A host whose shared keys differ from the deployment's refuses to start (KeyMismatchError).
    await checkDeploymentKeys(
      new Sql(orm),
      [
        { name: `response_signing:${secrets.signing.kid}`, setting: 'RESPONSE_SIGNING_KEY', key: secrets.signingSeed },
        { name: 'license_hash', setting: 'LICENSE_HASH_KEY', key: secrets.licenseHashKey },
        { name: 'two_factor', setting: 'TWO_FACTOR_KEY', key: secrets.twoFactorKey },
      ],
      new Date(clock.now()),
    );
    const geo = await GeoLocator.open(config.geoipDb, log);
    coordinator = config.redisUrl
      ? new RedisCoordinator(config.redisUrl, config.redisPrefix)
      : new LocalCoordinator(() => clock.now(), { durablePrefixes: [SESSION_KEY_PREFIX] });
    if (coordinator instanceof RedisCoordinator) {
      await coordinator.ping();
      const persistence = await coordinator.persistence();
      if (persistence !== 'aof') {
        log.warn(
          { persistence },
          'redis.no_persistence: client and heartbeat sessions live in Redis; without appendonly yes ' +
            'a Redis restart ends every one of them (clients must init and activate again). ' +
            'See docs/operations.md "Redis persistence".',
        );
      }
    }
    const sql = new Sql(orm);
    const audit = createAudit({
      sql,
      log,
      now: () => clock.now(),
      locate: async (ip) => locationText(await geo.lookup(ip)),
    });
    const memoryTrim =
      config.memoryTrimMs > 0
        ? startMallocTrim({
            minIntervalMs: config.memoryTrimMs,
            onTrim: (seconds) => log.debug({ ms: Math.round(seconds * 1e4) / 10 }, 'memory.trimmed'),
          })
        : null;
    if (config.memoryTrimMs > 0 && !memoryTrim)
      log.info(
        'memory.trim_unavailable: no glibc malloc_trim to call here; freed C-heap memory stays with the process',
      );
    let closing: Promise<void> | undefined;
    const o = orm;
    const c = coordinator;
    return {
      config,
      log,
      clock,
      orm: o,
      sql,
      audit,
      coordinator: c,
      secrets,
      geo,
      memoryTrim,
      close: () =>
        (closing ??= (async () => {
          memoryTrim?.stop();
          await audit.repository.flush();
          audit.repository.close();
          await c.close();
          await o.close(true);
          await embedded?.stop();
        })()),
    };
  } catch (err) {
    await coordinator?.close().catch(() => undefined);
    await orm?.close(true).catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw err;
  }
}

// ---- the modules ------------------------------------------------------------------------------

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

/** Every module's handle, built in the declared module order (docs/architecture.md). */
function createDomain(s: Services) {
  const now = () => s.clock.now();
  const { log, sql, orm, coordinator, config, secrets } = s;
  const audit = s.audit.repository;
  const base = { sql, log, now, coordinator };
  // With Redis, other workers call this one over a direct, authenticated connection (pub/sub as fallback).
  const node = new ClusterNode<ClusterOps>(coordinator, log, now, {
    listen:
      coordinator.kind === 'redis'
        ? {
            host: config.clusterHost,
            port: config.clusterPort === 0 ? 0 : config.clusterPort + config.workerIndex,
            advertiseHost: config.clusterAdvertiseHost,
            ackTimeoutMs: config.clusterPeerTimeoutMs,
          }
        : undefined,
    route: config.affinityRoute === undefined ? undefined : `${config.affinityRoute}-${config.workerIndex}`,
  });
  const access = createAccess(
    accessDeps(s, {
      reachableApps: (p) => apps.reachableApps(p),
      reachesApp: (p, appId) => apps.reachesApp(p, appId),
      recordApp: (kind, id) =>
        kind === 'ban'
          ? apps.appOfBan(id)
          : kind === 'product'
            ? commerce.appOfProduct(id)
            : keys.records.appOf(kind, id),
    }),
  );
  const notify = createNotify({
    sql,
    coordinator,
    audit,
    log,
    now,
    allowPrivate: config.allowPrivateWebhooks,
    ...(config.webhookRetryMs ? { retryDelaysMs: config.webhookRetryMs } : {}),
    dataDir: config.dataDir,
    developerEmails: config.developerEmails,
    discordHosts: config.webhookDiscordHosts,
    geoAttribution: s.geo.attribution,
    secretOf: async (accountId) => (await access.accounts.findById(accountId))?.webhookSecret ?? null,
  });
  const { events, webhooks } = notify;
  const client = createClient({
    ...base,
    audit,
    node,
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
    ...base,
    node,
    sessions: client.sessions,
    audit,
    events,
    webhooks,
    maxLiveActors: config.heartbeatMaxLiveActors,
    checkpointed: local !== undefined,
    keySeats: (licenseId) => keys.licenses.seatPolicy(licenseId),
    // Built below: activation needs the gateway, the gateway asks activation for a license's grace.
    grace: (app, record) => activation.service.graceForSession(app, record),
    expiring: {
      keys: { expiredBetween: (...a) => keys.licenses.expiredBetween(...a) },
      users: { expiredBetween: (...a) => keys.users.expiredBetween(...a) },
    },
    isLeader: () => node.fenceOf(0) !== undefined,
  });
  const apps = createApps({
    ...base,
    orm,
    audit,
    accounts: access.accounts,
    appCache: client.appCache,
    events,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    keys: {
      counts: (ids, resellerIds) => keys.records.counts(ids, resellerIds),
      keepOnlyEntitlements: (appId, codes, tx) => keys.records.keepOnlyEntitlements(appId, codes, tx),
    },
  });
  const keys = createKeys({
    ...base,
    audit,
    accounts: access.accounts,
    apps: apps.service,
    events,
    webhooks,
    licenseHashKey: secrets.licenseHashKey,
    offline: { offlineForKey: (...a) => activation.service.offlineForKey(...a) },
  });
  const geo = createGeo({ locator: s.geo, records: keys.sightings, log });
  const jobs = createJobs({
    sql,
    keys: keys.bulk,
    audit,
    notify: (accountId, data) => events.publishAccount('job.progress', accountId, data),
    actorOf,
    mayView: (viewer, creatorId) => overseesAccount(viewer, creatorId, (id) => access.accounts.subtreeIds(id)),
    now,
    log,
  });
  const activation = createActivation({
    ...base,
    node,
    sessions: client.sessions,
    heartbeats: heartbeat.gateway,
    audit,
    events,
    webhooks,
    geo: geo.activation,
    keys,
    licenseHashKey: secrets.licenseHashKey,
    signing: () => secrets.signing,
    dataDir: config.dataDir,
    screenshotStoreBytes: config.screenshotStoreBytes,
    faultAfterClaimMs: config.faultAfterClaimMs,
  });
  const commerce = createCommerce({
    ...base,
    audit,
    apps: apps.service,
    generator: keys.generator,
    previews: (ids) => keys.records.previews(ids),
    sealKey: secrets.sealKey,
  });
  const portal = createPortal({
    sql,
    clearDevices: (licenseId, tx) => keys.customers.clearDevices(licenseId, tx),
    customers: keys.customers,
    apps: apps.applications,
    lockout: activation.lockout,
    audit,
    events,
    licenseHashKey: secrets.licenseHashKey,
    liveSessions: async (licenseId) => (await heartbeat.owner.seats.liveCounts([licenseId])).get(licenseId) ?? 0,
    devices: keys.devices,
    offline: activation.service,
    webhooks,
    now,
  });
  const airgap = createAirgap({
    apps: apps.service,
    clientApp: (id) => client.appCache.getById(id),
    activation: activation.service,
    keys: keys.lookup,
    audit,
    events,
    signing: () => secrets.signing,
    now,
  });
  const realtime = createRealtime({
    log,
    now,
    coordinator,
    events,
    appCache: client.appCache,
    sessions: client.sessions,
    heartbeats: heartbeat.gateway,
    owner: heartbeat.owner,
    apps: apps.service,
    audit,
  });
  const team = createTeam({
    orm,
    repos: { accounts: access.accounts, apps: apps.applications, audit, sessions: access.sessions },
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    developerEmails: config.developerEmails,
    log,
    now,
    access: access.signal,
    twoFactor: access.auth.twoFactor,
    events,
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
    activation,
    commerce,
    portal,
    airgap,
    realtime,
    team,
    /** Subscriptions, sweepers and the recovery of keys a dead process left pending. */
    async start() {
      await client.start();
      await events.start();
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
      await webhooks.drain();
      await jobs.drain();
      // Hand every shard back (state is already durable with Redis), then stop answering calls.
      await node.close();
      heartbeat.owner.close();
      // After the last beat: what this worker counted is added before the pool closes.
      await heartbeat.beatCounts.close();
      activation.close();
      await events.stop();
      await access.signal.stop();
      await client.stop();
      // Last logins and IPs still queued are written before the pool closes.
      await keys.close();
    },
  };
}

type Domain = ReturnType<typeof createDomain>;

// ---- the HTTP application ---------------------------------------------------------------------

export interface App {
  readonly live: LiveHub;
  readonly channel: ClientChannel;
  readonly server: HttpServer;
  readonly router: Router;
  readonly domain: Domain;
}

/** Gauges read at scrape time: what this worker holds and does. */
function registerGauges(metrics: Metrics, s: Services, d: Domain): void {
  metrics.gauge(
    'keywarden_process_pid',
    "This worker's process id (tells workers sharing a port apart)",
    () => process.pid,
  );
  if (s.memoryTrim) {
    const trim = s.memoryTrim;
    metrics.counter(
      'keywarden_memory_trims_total',
      'Free C-heap pages given back after full collections',
      () => trim.trims,
    );
    metrics.counter(
      'keywarden_memory_trim_seconds_total',
      'Time the event loop spent giving them back',
      () => trim.seconds,
    );
  }
  registerClusterGauges(metrics, d.node);
  d.heartbeat.gauges(metrics);
  s.audit.gauges(metrics);
  metrics.gauge('keywarden_license_live_actors', 'License-key actors currently live', () => d.activation.licenses.size);
}

export function createApp(s: Services): App {
  const uws = loadUws();
  const metrics = new Metrics();
  const now = () => s.clock.now();
  const resolveIp = createClientIpResolver(s.config.trustedProxies);
  // PROTOCOL 11.20: every answer under /api/client/ leaves signed, the guard's and the fallback's too.
  const signClient = (method: string, path: string, nonce: string, reply: Reply): Reply =>
    path.startsWith('/api/client/') ? signReply(reply, s.secrets.signing, method, path, nonce, now()) : reply;
  const server = createHttpServer(uws, {
    log: s.log,
    resolveIp,
    onReply: (route, method, status, startedAt) => metrics.observe(route, method, status, startedAt),
    finishError: signClient,
  });
  const router = new Router();
  const domain = createDomain(s);
  const d = domain;
  registerGauges(metrics, s, domain);
  metrics.gauge('keywarden_http_inflight', 'HTTP requests being read or answered', () => server.inflight);
  d.client.gauges(metrics);
  const auth = d.access.auth;
  const gate = d.client.gate;
  createSystem({
    metrics,
    log: s.log,
    database: s.sql,
    coordinator: s.coordinator,
    clockSkewMs: () => d.node.clockSkewMs,
  }).mount(router);
  d.access.mount(router);
  d.apps.mount(router, { auth, publicUrl: s.config.publicUrl, publishedKeys: () => s.secrets.publishedKeys });
  d.activation.mount(router, gate, d.client.limiter);
  d.heartbeat.mount(router, gate);
  d.client.mount(router);
  d.keys.mount(router, {
    auth,
    liveSessions: (appId) => d.heartbeat.owner.countForApp(appId),
    liveSeats: (ids) => d.heartbeat.owner.seats.liveCounts(ids),
  });
  s.audit.mount(router, { auth, accounts: d.access.accounts, apps: d.apps.service });
  // PROTOCOL 14: the portal's one per-IP budget (sign-in and order pages), shared by every worker.
  const portalLimiter = addressLimiter(s.coordinator, now, 'portal', 20);
  d.commerce.mount(router, { auth, portalLimiter });
  d.portal.mount(router, { limiter: portalLimiter, trustedOrigins: auth.trustedOrigins });
  d.airgap.mount(router, { auth, portalCaller: d.portal.caller(auth.trustedOrigins) });
  d.team.mount(router, auth);
  d.jobs.mount(router, auth);
  d.notify.mountDeliveries(router, {
    auth,
    mayRead: (p, accountId) => overseesAccount(p, accountId, (id) => d.access.accounts.subtreeIds(id)),
  });
  const live = d.notify.mountLive(server, {
    log: s.log,
    auth,
    apps: d.apps.service,
    access: d.access.signal,
    accounts: d.access.accounts,
    resolveIp,
  });
  const channel = d.realtime.mount(server, router, {
    log: s.log,
    now,
    client: gate,
    heartbeats: d.heartbeat.gateway,
    limiter: addressLimiter(s.coordinator, now, 'ws', 60),
    resolveIp,
    auth,
    metrics,
  });
  d.notify.liveDocs(router);
  router.mount(server);
  // The web dashboard's files (web/dist) at /dashboard/, read into memory now, off the request path.
  void mountDashboard(server).preload();
  // PROTOCOL 11.20: an unknown path is 404, a known path with another method 405 with `Allow`;
  // under /api/client/ both leave signed like every other client response.
  server.mountFallback(async (req) => {
    const allowed = router.methodsAt(req.path);
    // A path whose method is served but that reached here anyway (a malformed %-escape) names nothing: 404.
    const err =
      allowed.length > 0 && !allowed.includes(req.method)
        ? new AppError('method_not_allowed', undefined, { Allow: allowed.map((m) => m.toUpperCase()).join(', ') })
        : new AppError('route_not_found');
    return signClient(req.method, req.path, req.headers['x-nonce'] ?? '', errorReply(err, s.log));
  });
  return { server, router, domain, live, channel };
}
