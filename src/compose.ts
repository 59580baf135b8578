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
import {
  AccessSignal,
  AccountRepository,
  AccountSecurity,
  ApiTokenRepository,
  DashboardAuth,
  SessionRepository,
  TwoFactorRepository,
  accountSecurityRoutes,
  apiTokenRoutes,
  authRoutes,
  twoFactorRoutes,
  type DashboardAuthDeps,
} from './modules/access/index.js';
import {
  ActivationService,
  DeviceRepository,
  EndUserRepository,
  KeyTouchesRepository,
  LicenseHost,
  LicenseOpsRepository,
  ScreenshotRepository,
  ScreenshotStore,
  TrialRepository,
  activationRoutes,
  clientLockout,
  licenseEffects,
  routeLicenses,
  type LicenseOps,
} from './modules/activation/index.js';
import {
  ApplicationRepository,
  AppsService,
  BlacklistRepository,
  EntitlementRepository,
  appsRoutes,
  scopeOf,
} from './modules/apps/index.js';
import { AuditLog, AuditRepository, auditRoutes } from './modules/audit/index.js';
import { CommerceRepository, FulfilService, ProductsService, commerceRoutes } from './modules/commerce/index.js';
import {
  ClientAppCache,
  ClientSessions,
  NonceRepository,
  SESSION_KEY_PREFIX,
  clientKeysRoute,
  clientLimiter,
  type ClientDeps,
} from './modules/client/index.js';
import { ActivationGeo, GeoLocator, GeoRepository, locationText } from './modules/geo/index.js';
import {
  BeatCounts,
  ExpiryWatch,
  HeartbeatGateway,
  HeartbeatOwner,
  heartbeatRoutes,
  type HeartbeatOps,
} from './modules/heartbeat/index.js';
import {
  KeyAdminRepository,
  KeyGenerator,
  KeysAdminService,
  LicenseRepository,
  keysRoutes,
} from './modules/keys/index.js';
import { EventBus, LiveHub, WebhookRepository, WebhookService } from './modules/notify/index.js';
import { ClientChannel, ClientPushService, channelRoutes } from './modules/realtime/index.js';
import { PortalRepository, PortalService, portalCaller, portalRoutes } from './modules/portal/index.js';
import { createAirgap } from './modules/airgap/index.js';
import { systemRoutes } from './modules/system/index.js';
import { TeamRepository, TeamService, teamRoutes } from './modules/team/index.js';

// ---- platform services ------------------------------------------------------------------------

interface Repositories {
  accounts: AccountRepository;
  sessions: SessionRepository;
  apiTokens: ApiTokenRepository;
  twoFactor: TwoFactorRepository;
  apps: ApplicationRepository;
  licenses: LicenseRepository;
  blacklist: BlacklistRepository;
  audit: AuditRepository;
  nonces: NonceRepository;
  /** Last login and IP of activated keys, written behind the answer. */
  keyTouches: KeyTouchesRepository;
  entitlements: EntitlementRepository;
}

export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly clock: Clock;
  readonly orm: Orm;
  readonly sql: Sql;
  readonly repos: Repositories;
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
    const accounts = new AccountRepository(orm);
    const repos: Repositories = {
      accounts,
      sessions: new SessionRepository(orm),
      apiTokens: new ApiTokenRepository(orm),
      twoFactor: new TwoFactorRepository(sql),
      apps: new ApplicationRepository(orm, sql),
      licenses: new LicenseRepository(sql),
      blacklist: new BlacklistRepository(orm, sql),
      audit: new AuditRepository(
        sql,
        log,
        () => clock.now(),
        async (ip) => locationText(await geo.lookup(ip)),
      ),
      nonces: new NonceRepository(sql),
      keyTouches: new KeyTouchesRepository(sql, log),
      entitlements: new EntitlementRepository(sql),
    };
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
      repos,
      coordinator: c,
      secrets,
      geo,
      memoryTrim,
      close: () =>
        (closing ??= (async () => {
          memoryTrim?.stop();
          await repos.audit.flush();
          repos.audit.close();
          await repos.keyTouches.close();
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

/** How often expired request nonces are deleted (each lives 600 s; a claim takes over an expired row anyway). */
const NONCE_PURGE_MS = 60_000;
/** How often a worker adds the beats it counted to beat_counts (a chart lags by at most this). */
const BEAT_FLUSH_MS = 10_000;

type ClusterOps = HeartbeatOps & LicenseOps;

interface Domain {
  auth: DashboardAuth;
  /** The caller's own sessions, second factor and (owners) two-factor policy. */
  security: AccountSecurity;
  apps: AppsService;
  appCache: ClientAppCache;
  sessions: ClientSessions;
  licenseOps: LicenseOpsRepository;
  licenses: LicenseHost;
  /** Heartbeats as the receiving worker runs them: the refusal budget, routing to the owner, proofs. */
  heartbeats: HeartbeatGateway;
  /** The sessions of the shards this worker owns: actors, durable state, revocations. */
  heartbeatOwner: HeartbeatOwner;
  /** Accepted beats this worker counted and has not yet added to beat_counts. */
  beatCounts: BeatCounts;
  activation: ActivationService;
  keys: KeysAdminService;
  generator: KeyGenerator;
  products: ProductsService;
  fulfil: FulfilService;
  portal: PortalService;
  auditLog: AuditLog;
  team: TeamService;
  webhooks: WebhookService;
  events: EventBus;
  /** Tells live streams on every worker to re-check what their subscribers may see. */
  access: AccessSignal;
  /** What the realtime client channel pushes (revocations, update_required, notices). */
  push: ClientPushService;
  node: ClusterNode<ClusterOps>;
  /** Subscriptions, sweepers and the recovery of keys a dead process left pending. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Dashboard sign-in's dependencies (also used by the command line). */
export function dashboardAuthDeps(s: Services, access?: AccessSignal): DashboardAuthDeps {
  return {
    ...(access ? { access } : {}),
    repos: s.repos,
    secrets: s.secrets,
    coordinator: s.coordinator,
    developerEmails: s.config.developerEmails,
    log: s.log,
    now: () => s.clock.now(),
    audit: s.repos.audit,
    // An API token's app_ids are applications its creator reaches (an app's visibility lives in apps/).
    reachableApps: async (p) => (await s.repos.apps.list(scopeOf(p))).map((a) => a.id),
    // PROTOCOL 11.36: the account's own applications, before a token's app_ids narrow them.
    reachesApp: async ({ token: _narrowedBy, ...account }, appId) => s.repos.apps.reaches(scopeOf(account), appId),
    recordApp: (kind, id) => s.repos.apps.appOfRecord(kind, id),
    // CSRF: cookie-authenticated writes may come from the request's own Host or from PUBLIC_URL.
    trustedOrigins: s.config.publicUrl ? [s.config.publicUrl] : [],
  };
}

function createDomain(s: Services): Domain {
  const now = () => s.clock.now();
  const log = s.log;
  const appCache = new ClientAppCache(s.repos.apps, s.repos.blacklist, s.coordinator, now);
  const licenseOps = new LicenseOpsRepository(s.sql);
  const devices = new DeviceRepository(s.sql);
  const licenses = new LicenseHost(
    licenseEffects(licenseOps, s.repos.keyTouches, { now, afterClaimMs: s.config.faultAfterClaimMs }),
    { log, now },
  );
  const events = new EventBus(s.coordinator, now, log);
  const access = new AccessSignal(s.coordinator, log);
  const webhooks = new WebhookService({
    targets: new WebhookRepository(s.sql),
    audit: s.repos.audit,
    log,
    now,
    allowPrivate: s.config.allowPrivateWebhooks,
    ...(s.config.webhookRetryMs ? { retryDelaysMs: s.config.webhookRetryMs } : {}),
    dataDir: s.config.dataDir,
    developerEmails: s.config.developerEmails,
    discordHosts: s.config.webhookDiscordHosts,
    geoAttribution: s.geo.attribution,
  });
  // With Redis, other workers call this one over a direct, authenticated connection (pub/sub as fallback).
  const node = new ClusterNode<ClusterOps>(s.coordinator, log, now, {
    listen:
      s.coordinator.kind === 'redis'
        ? {
            host: s.config.clusterHost,
            port: s.config.clusterPort === 0 ? 0 : s.config.clusterPort + s.config.workerIndex,
            advertiseHost: s.config.clusterAdvertiseHost,
            ackTimeoutMs: s.config.clusterPeerTimeoutMs,
          }
        : undefined,
    route: s.config.affinityRoute === undefined ? undefined : `${s.config.affinityRoute}-${s.config.workerIndex}`,
  });
  // Sealed session tokens, drawn on shards this worker owns (session affinity).
  const sessions = new ClientSessions({
    coordinator: s.coordinator,
    now,
    tokenKey: s.secrets.sessionTokenKey,
    limit: s.config.clientSessionLimit,
    node,
  });
  const local = s.coordinator instanceof LocalCoordinator ? s.coordinator : undefined;
  // The owner registers its shard handlers and operations on the node itself.
  const heartbeatOwner = new HeartbeatOwner({
    now,
    log,
    sessions,
    audit: s.repos.audit,
    coordinator: s.coordinator,
    node,
    maxLiveActors: s.config.heartbeatMaxLiveActors,
    checkpointed: local !== undefined,
  });
  const beatCounts = new BeatCounts(s.sql, log);
  const heartbeats: HeartbeatGateway = new HeartbeatGateway({
    now,
    log,
    sessions,
    events,
    coordinator: s.coordinator,
    node,
    owner: heartbeatOwner,
    webhooks,
    keySeats: (licenseId) => s.repos.licenses.seatPolicy(licenseId),
    // Built below: activation needs the gateway, the gateway asks activation for a license's grace.
    grace: (app, record): Promise<{ grace_until?: string }> => activation.graceForSession(app, record),
    beats: beatCounts,
  });
  events.on((e) => heartbeatOwner.onEvent(e));
  const users = new EndUserRepository(s.sql);
  // PROTOCOL 12.8: the worker holding shard 0 announces expiries; every owner ends its sessions.
  const expiryWatch = new ExpiryWatch({
    now,
    log,
    events,
    keys: s.repos.licenses,
    users,
    isLeader: () => node.fenceOf(0) !== undefined,
  });
  // One process without Redis: client and heartbeat sessions survive a restart through PostgreSQL.
  const checkpoint = local
    ? new StateCheckpoint(new ProcessStateRepository(s.sql), [local, heartbeatOwner], {
        log,
        now,
        everyMs: s.config.stateCheckpointMs,
      })
    : undefined;
  const lockout = clientLockout(s.coordinator);
  const activation: ActivationService = new ActivationService({
    lockout,
    now,
    coordinator: s.coordinator,
    sessions,
    heartbeats,
    licenses: routeLicenses(node, licenses),
    licenseOps,
    users,
    audit: s.repos.audit,
    licenseHashKey: s.secrets.licenseHashKey,
    events,
    webhooks,
    screenshots: new ScreenshotStore(
      s.config.dataDir,
      new ScreenshotRepository(s.sql),
      log,
      s.config.screenshotStoreBytes,
      now,
    ),
    geo: new ActivationGeo({ locator: s.geo, records: new GeoRepository(s.sql), log }),
    devices,
    touches: s.repos.keyTouches,
    trials: new TrialRepository(s.sql),
    signing: () => s.secrets.signing,
  });
  const apps = new AppsService(
    { repos: s.repos, allowPrivateWebhooks: s.config.allowPrivateWebhooks, log, now },
    appCache,
    events,
  );
  const push = new ClientPushService({
    log,
    now,
    coordinator: s.coordinator,
    events,
    appCache,
    sessions,
    heartbeats,
    owner: heartbeatOwner,
    apps,
    audit: s.repos.audit,
  });
  const keys = new KeysAdminService(
    {
      audit: s.repos.audit,
      accounts: s.repos.accounts,
      licenseHashKey: s.secrets.licenseHashKey,
      now,
      devices,
      offline: activation,
      webhooks,
    },
    new KeyAdminRepository(s.sql, s.repos.keyTouches),
    apps,
    events,
  );
  const generator = new KeyGenerator({
    apps,
    licenses: s.repos.licenses,
    audit: s.repos.audit,
    events,
    licenseHashKey: s.secrets.licenseHashKey,
    now,
  });
  const commerce = new CommerceRepository(s.sql);
  const fulfil = new FulfilService({
    repo: commerce,
    generator,
    audit: s.repos.audit,
    sealKey: s.secrets.sealKey,
    log,
    now,
  });
  const portal = new PortalService({
    repo: new PortalRepository(s.sql),
    lockout,
    audit: s.repos.audit,
    events,
    licenseHashKey: s.secrets.licenseHashKey,
    liveSessions: async (licenseId) => (await heartbeatOwner.seats.liveCounts([licenseId])).get(licenseId) ?? 0,
    devices,
    offline: activation,
    webhooks,
    now,
  });
  let noncePurge: NodeJS.Timeout | undefined;
  let freezeToggle: (() => void) | undefined;
  const auth = new DashboardAuth(dashboardAuthDeps(s, access));
  return {
    auth,
    security: new AccountSecurity({
      sessions: s.repos.sessions,
      twoFactor: auth.twoFactor,
      now,
      audit: s.repos.audit,
      access,
    }),
    access,
    apps,
    appCache,
    sessions,
    licenseOps,
    licenses,
    heartbeats,
    heartbeatOwner,
    beatCounts,
    activation,
    keys,
    generator,
    products: new ProductsService({ repo: commerce, apps, audit: s.repos.audit, sealKey: s.secrets.sealKey, now }),
    fulfil,
    portal,
    auditLog: new AuditLog({ audit: s.repos.audit, accounts: s.repos.accounts, apps }),
    events,
    push,
    team: new TeamService(
      {
        repos: s.repos,
        allowPrivateWebhooks: s.config.allowPrivateWebhooks,
        developerEmails: s.config.developerEmails,
        log,
        now,
        access,
        twoFactor: auth.twoFactor,
        events,
      },
      new TeamRepository(s.orm, s.repos.accounts),
    ),
    webhooks,
    node,
    async start() {
      await appCache.start();
      await events.start();
      await access.start();
      await push.start();
      await node.start();
      if (s.config.faultPeerFreeze) {
        // Test hook: SIGUSR2 stops (then resumes) reading what other workers send directly.
        let frozen = false;
        freezeToggle = () => node.freezePeerLinks((frozen = !frozen));
        process.on('SIGUSR2', freezeToggle);
      }
      const restored = await checkpoint?.restore();
      if (restored) log.info({ restored }, 'state.restored');
      // Alone, seat tables live in memory: the restored heartbeat sessions take their seats back.
      if (local) await heartbeatOwner.seats.rebuild(heartbeatOwner.host.contexts());
      checkpoint?.start();
      heartbeatOwner.startSweeper();
      expiryWatch.start();
      beatCounts.start(BEAT_FLUSH_MS);
      fulfil.start();
      portal.start();
      noncePurge = setInterval(() => {
        s.repos.nonces.purgeExpired(new Date(now())).catch((err: unknown) => log.warn({ err }, 'nonce.purge_failed'));
      }, NONCE_PURGE_MS).unref();
      // One process alone (no Redis) cannot race a live claim: recover every pending key.
      // With other workers around, only claims older than any live register can be dead.
      const recovered = await licenseOps.recoverPending(
        new Date(now() - (s.coordinator.kind === 'local' ? 0 : 60_000)),
      );
      if (recovered > 0) log.warn({ recovered }, 'license.pending_recovered');
    },
    async stop() {
      clearInterval(noncePurge);
      expiryWatch.stop();
      if (freezeToggle) process.off('SIGUSR2', freezeToggle);
      fulfil.stop();
      portal.stop();
      // Realtime channels end first (1001), so their clients reconnect to a worker that stays.
      await push.stop();
      // After the last request: what the sessions are now is what the next start continues from.
      await checkpoint?.stop();
      await webhooks.drain();
      // Hand every shard back (state is already durable with Redis), then stop answering calls.
      await node.close();
      heartbeatOwner.close();
      // After the last beat: what this worker counted is added before the pool closes.
      await beatCounts.close();
      licenses.close();
      await events.stop();
      await access.stop();
      await appCache.stop();
    },
  };
}

// ---- the HTTP application ---------------------------------------------------------------------

export interface App {
  readonly live: LiveHub;
  readonly channel: ClientChannel;
  readonly server: HttpServer;
  readonly router: Router;
  readonly domain: Domain;
}

/** Gauges read at scrape time: what this worker holds and does. */
function registerGauges(metrics: Metrics, s: Services, domain: Domain): void {
  const g = (name: string, help: string, read: () => number) => metrics.gauge(name, help, read);
  g('keywarden_process_pid', "This worker's process id (tells workers sharing a port apart)", () => process.pid);
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
  g('keywarden_cluster_members', 'Live workers this worker sees', () => domain.node.memberCount);
  g('keywarden_cluster_owned_shards', 'Shards whose lease this worker holds', () => domain.node.ownedShards);
  g('keywarden_cluster_forwarded_total', 'Actor operations sent to the owning worker', () => domain.node.forwarded);
  g(
    'keywarden_cluster_direct_total',
    'Forwarded operations sent over a direct connection to the owning worker',
    () => domain.node.directCalls,
  );
  g(
    'keywarden_cluster_pubsub_total',
    "Forwarded operations sent through Redis pub/sub (the owner's address unknown or unreachable)",
    () => domain.node.pubsubCalls,
  );
  g('keywarden_cluster_local_total', 'Actor operations run on this worker', () => domain.node.servedLocally);
  g('keywarden_cluster_peer_links_up', 'Direct links to other workers working now', () => domain.node.peerLinksUp);
  g(
    'keywarden_cluster_peer_link_down_total',
    'Direct links declared down (a ping unanswered for CLUSTER_PEER_TIMEOUT_MS, or the connection closed)',
    () => domain.node.peerLinkDowns,
  );
  g(
    'keywarden_cluster_fallback_total',
    'Forwarded operations re-sent through Redis pub/sub because their direct link went down',
    () => domain.node.fallbackCalls,
  );
  g(
    'keywarden_cluster_expired_frames_total',
    'Operations from other workers dropped unrun: they arrived after their deadline (the caller had answered)',
    () => domain.node.expiredFrames,
  );
  g(
    'keywarden_cluster_duplicate_frames_total',
    'Second copies of a forwarded operation (after a fallback, or published again) answered without running it again',
    () => domain.node.duplicateFrames,
  );
  g(
    'keywarden_cluster_resent_total',
    'Forwarded operations published again through Redis pub/sub while awaited (pub/sub may lose a message)',
    () => domain.node.resentCalls,
  );
  g(
    'keywarden_cluster_clock_skew_ms',
    "This host's clock minus the coordinator's (Redis TIME), ms; over 1000 is reported in /readyz",
    () => domain.node.clockSkewMs,
  );
  g('keywarden_heartbeat_sessions', 'Heartbeat sessions hosted by this worker', () => domain.heartbeatOwner.host.size);
  g(
    'keywarden_heartbeat_live_actors',
    'Heartbeat sessions kept unpacked (recently active; the rest are packed)',
    () => domain.heartbeatOwner.host.unpacked,
  );
  g(
    'keywarden_heartbeat_unsettled',
    'Heartbeat sessions whose last Redis write failed without a clear answer, being written again',
    () => domain.heartbeatOwner.unsettledCount,
  );
  g(
    'keywarden_heartbeat_refusals_unaudited_total',
    'Refused beats and starts answered without an audit line (at most one a minute per session is written)',
    () => domain.heartbeats.refusals.unaudited,
  );
  g(
    'keywarden_audit_queued',
    'Audit entries waiting to be written (they wait out a database outage)',
    () => s.repos.audit.queued,
  );
  g(
    'keywarden_audit_dropped_total',
    'Audit entries dropped because the queue overflowed during a database outage',
    () => s.repos.audit.dropped,
  );
  g('keywarden_license_live_actors', 'License-key actors currently live', () => domain.licenses.size);
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

  // What every client call needs: the REST routes and the realtime channel's calls.
  const gate: ClientDeps = {
    log: s.log,
    now,
    apps: d.appCache,
    sessions: d.sessions,
    audit: s.repos.audit,
    nonces: s.repos.nonces,
    signingKey: () => s.secrets.signing,
    ...(s.config.affinityRoute === undefined
      ? {}
      : {
          affinity: {
            own: `${s.config.affinityRoute}-${s.config.workerIndex}`,
            routeOf: (session: string) => d.node.routeOf(shardOf(session)),
            counts: { echoed: 0, reached: 0 },
          },
        }),
  };
  const affinity = gate.affinity;
  if (affinity) {
    metrics.gauge(
      'keywarden_affinity_echoed_total',
      'Client calls that carried X-Keywarden-Route',
      () => affinity.counts.echoed,
    );
    metrics.gauge(
      'keywarden_affinity_reached_total',
      'Client calls that reached the worker their X-Keywarden-Route named',
      () => affinity.counts.reached,
    );
  }
  systemRoutes(router, {
    metrics,
    log: s.log,
    database: s.sql,
    coordinator: s.coordinator,
    clockSkewMs: () => d.node.clockSkewMs,
  });
  authRoutes(router, { auth: d.auth });
  twoFactorRoutes(router, { auth: d.auth });
  apiTokenRoutes(router, { auth: d.auth });
  accountSecurityRoutes(router, { auth: d.auth, security: d.security });
  appsRoutes(router, {
    auth: d.auth,
    apps: d.apps,
    publicUrl: s.config.publicUrl,
    publishedKeys: () => s.secrets.publishedKeys,
  });
  activationRoutes(router, { gate, activation: d.activation, limit: clientLimiter(s.coordinator, now) });
  heartbeatRoutes(router, { gate, heartbeats: d.heartbeats });
  clientKeysRoute(router, { signingKey: () => s.secrets.signing, publishedKeys: () => s.secrets.publishedKeys, now });
  keysRoutes(router, {
    auth: d.auth,
    keys: d.keys,
    generator: d.generator,
    liveSessions: (appId) => d.heartbeatOwner.countForApp(appId),
    liveSeats: (ids) => d.heartbeatOwner.seats.liveCounts(ids),
    now,
  });
  auditRoutes(router, { auth: d.auth, log: d.auditLog });
  // PROTOCOL 14: the portal's one per-IP budget (sign-in and order pages), shared by every worker.
  const portalLimiter = addressLimiter(s.coordinator, now, 'portal', 20);
  commerceRoutes(router, { auth: d.auth, products: d.products, fulfil: d.fulfil, portalLimiter });
  portalRoutes(router, { portal: d.portal, limiter: portalLimiter, trustedOrigins: d.auth.trustedOrigins });
  createAirgap({
    ...{ auth: d.auth, apps: d.apps, activation: d.activation, keys: d.keys, events: d.events, audit: s.repos.audit },
    ...{ clientApp: (id: string) => d.appCache.getById(id), signing: () => s.secrets.signing, now },
    portalCaller: portalCaller(d.portal, d.auth.trustedOrigins),
  }).mount(router);
  teamRoutes(router, { auth: d.auth, team: d.team });
  const live = new LiveHub({
    log: s.log,
    auth: d.auth,
    apps: d.apps,
    events: d.events,
    access: d.access,
    accounts: s.repos.accounts,
    resolveIp,
  });
  live.start();
  live.mount(server);
  const channel = new ClientChannel({
    log: s.log,
    now,
    client: gate,
    heartbeats: d.heartbeats,
    push: d.push,
    limiter: addressLimiter(s.coordinator, now, 'ws', 60),
    resolveIp,
  });
  channel.start();
  channel.mount(server);
  channelRoutes(router, { auth: d.auth, push: d.push });
  metrics.gauge(
    'keywarden_channel_connections',
    'Realtime channel connections open on this worker',
    () => channel.size,
  );
  metrics.gauge(
    'keywarden_channel_pushes_total',
    'Messages pushed on realtime channels by this worker',
    () => channel.pushed,
  );
  metrics.gauge(
    'keywarden_channel_slow_dropped_total',
    'Realtime channels closed because the client did not read fast enough',
    () => channel.dropped,
  );
  const notHere = async () => {
    throw new AppError('route_not_found');
  };
  router.add({
    method: 'get',
    path: '/api/ws',
    docOnly: true,
    handler: notHere,
    doc: {
      summary:
        'WebSocket: send {"type":"subscribe","app_id"}; receive {"type":"event","event":{id,kind,app_id,at,data}}; ' +
        'subprotocol msgpack for MessagePack frames',
      tag: 'live',
      auth: 'dashboard',
      permission: 'any account the app is visible to',
    },
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/events',
    docOnly: true,
    handler: notHere,
    doc: {
      summary: 'Server-Sent Events: one `event:` per kind',
      tag: 'live',
      auth: 'dashboard',
      permission: 'any account the app is visible to',
    },
  });
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
