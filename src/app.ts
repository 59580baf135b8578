// createApp builds the HTTP application from services; it does not listen (STYLE 9).
import type { Services } from './services.js';
import { AppError } from './errors.js';
import { createClientIpResolver } from './platform/http/client-ip.js';
import { Metrics } from './platform/http/metrics.js';
import { Router } from './platform/http/router.js';
import { errorReply } from './platform/http/error-reply.js';
import { signReply } from './platform/http/client-signing.js';
import { createHttpServer, loadUws, type HttpServer } from './platform/http/uws.js';
import type { Reply } from './platform/http/types.js';
import { systemRoutes } from './modules/system/system.routes.js';
import { authRoutes } from './modules/access/auth.routes.js';
import { appsRoutes } from './modules/apps/apps.routes.js';
import { clientDepsOf, clientRoutes } from './modules/client/client.routes.js';
import { DashboardAuth, type DashboardAuthDeps } from './modules/access/auth.service.js';
import { AppsService } from './modules/apps/apps.service.js';
import { ClientAppCache } from './modules/client/client-app-cache.js';
import { addressLimiter } from './platform/limits/compact-rate-limiter.js';
import { ClientSessions } from './modules/client/client-sessions.js';
import { ClientService } from './modules/activation/activation.service.js';
import { HeartbeatService } from './modules/heartbeat/heartbeat.service.js';
import { LicenseHost } from './modules/activation/license-host.js';
import { LicenseOpsRepository } from './modules/activation/license-ops.repository.js';
import { licenseEffects } from './modules/activation/license-effects.js';
import { EndUserRepository } from './modules/activation/end-user.repository.js';
import { WebhookRepository } from './modules/notify/webhook.repository.js';
import { KeyAdminRepository } from './modules/keys/key-admin.repository.js';
import { KeysAdminService } from './modules/keys/keys.service.js';
import { EventBus } from './modules/notify/events.js';
import { AccessSignal } from './modules/access/access-signal.js';
import { keysRoutes } from './modules/keys/keys.routes.js';
import { teamRoutes } from './modules/team/team.routes.js';
import { TeamService } from './modules/team/team.service.js';
import { TeamRepository } from './modules/access/account.repository.js';
import { LiveHub } from './modules/notify/live.js';
import { ClientChannel } from './modules/realtime/client-channel.js';
import { ClientPushService } from './modules/realtime/client-push.service.js';
import { channelRoutes } from './modules/realtime/channel.routes.js';
import { WebhookService } from './modules/notify/webhooks.service.js';
import { ClusterNode, shardOf } from './platform/cluster/cluster-node.js';
import type { LicenseOp } from './modules/activation/license.machine.js';
import type { ClusterOps } from './cluster-ops.js';
import { ScreenshotStore } from './modules/activation/screenshots.js';
import { ScreenshotRepository } from './modules/activation/screenshot.repository.js';
import { StateCheckpoint } from './platform/db/state-checkpoint.js';
import { ProcessStateRepository } from './platform/db/process-state.repository.js';
import { LocalCoordinator } from './platform/cluster/local.coordinator.js';
import { ActivationGeo } from './modules/geo/activation-geo.js';
import { GeoRepository } from './modules/geo/geo.repository.js';
import { mountDashboard } from './platform/http/static.js';

/** How often expired request nonces are deleted (each lives 600 s; a claim takes over an expired row anyway). */
const NONCE_PURGE_MS = 60_000;

export interface Domain {
  auth: DashboardAuth;
  apps: AppsService;
  appCache: ClientAppCache;
  sessions: ClientSessions;
  licenseOps: LicenseOpsRepository;
  licenses: LicenseHost;
  heartbeats: HeartbeatService;
  client: ClientService;
  keys: KeysAdminService;
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

export interface AppDeps {
  s: Services;
  domain: Domain;
  router: Router;
  metrics: Metrics;
}

export interface App {
  readonly live: LiveHub;
  readonly channel: ClientChannel;
  readonly server: HttpServer;
  readonly router: Router;
  readonly domain: Domain;
}

/** Dashboard sign-in's dependencies (also used by the command line). */
export function dashboardAuthDeps(s: Services, access?: AccessSignal): DashboardAuthDeps {
  return {
    ...(access ? { access } : {}),
    repos: s.repos,
    coordinator: s.coordinator,
    developerEmails: s.config.developerEmails,
    log: s.log,
    now: () => s.clock.now(),
    // CSRF: cookie-authenticated writes may come from the request's own Host or from PUBLIC_URL.
    trustedOrigins: s.config.publicUrl ? [s.config.publicUrl] : [],
  };
}

export function createDomain(s: Services): Domain {
  const now = () => s.clock.now();
  const appCache = new ClientAppCache(s.repos.apps, s.repos.blacklist, s.coordinator, now);
  const licenseOps = new LicenseOpsRepository(s.sql);
  const licenses = new LicenseHost(
    licenseEffects(licenseOps, s.repos.keyTouches, { now, afterClaimMs: s.config.faultAfterClaimMs }),
    {
      log: s.log,
      now,
    },
  );
  const events = new EventBus(s.coordinator, now, s.log);
  const access = new AccessSignal(s.coordinator, s.log);
  const webhooks = new WebhookService({
    targets: new WebhookRepository(s.sql),
    audit: s.repos.audit,
    log: s.log,
    now,
    allowPrivate: s.config.allowPrivateWebhooks,
    ...(s.config.webhookRetryMs ? { retryDelaysMs: s.config.webhookRetryMs } : {}),
    dataDir: s.config.dataDir,
    developerEmails: s.config.developerEmails,
    discordHosts: s.config.webhookDiscordHosts,
    geoAttribution: s.geo.attribution,
  });
  // With Redis, other workers call this one over a direct, authenticated connection (pub/sub as fallback).
  const node = new ClusterNode<ClusterOps>(s.coordinator, s.log, now, {
    listen:
      s.coordinator.kind === 'redis'
        ? {
            host: s.config.clusterHost,
            port: s.config.clusterPort === 0 ? 0 : s.config.clusterPort + s.config.workerIndex,
            advertiseHost: s.config.clusterAdvertiseHost,
          }
        : undefined,
  });
  // Sealed session tokens, drawn on shards this worker owns (issue 13).
  const sessions = new ClientSessions({
    coordinator: s.coordinator,
    now,
    tokenKey: s.secrets.sessionTokenKey,
    limit: s.config.clientSessionLimit,
    node,
  });
  // The heartbeat service registers its shard handlers and operations on the node itself.
  const heartbeats = new HeartbeatService({
    now,
    log: s.log,
    sessions,
    audit: s.repos.audit,
    events,
    coordinator: s.coordinator,
    node,
    maxLiveActors: s.config.heartbeatMaxLiveActors,
    checkpointed: s.coordinator instanceof LocalCoordinator,
  });
  // One process without Redis: client and heartbeat sessions survive a restart through PostgreSQL.
  const checkpoint =
    s.coordinator instanceof LocalCoordinator
      ? new StateCheckpoint(new ProcessStateRepository(s.sql), [s.coordinator, heartbeats], {
          log: s.log,
          now,
          everyMs: s.config.stateCheckpointMs,
        })
      : undefined;
  // License-key actors live on the owner of the key's shard (the database arbitrates anyway).
  node.handle('lic.run', (a) => licenses.run(a.licenseId, a.op));
  const routedLicenses = {
    run: (licenseId: string, op: LicenseOp) =>
      node.route(shardOf(licenseId), 'lic.run', { licenseId, op }, () => licenses.run(licenseId, op)),
  };
  events.on((e) => heartbeats.onEvent(e));
  const client = new ClientService({
    now,
    coordinator: s.coordinator,
    sessions,
    heartbeats,
    licenses: routedLicenses,
    licenseOps,
    users: new EndUserRepository(s.sql),
    audit: s.repos.audit,
    licenseHashKey: s.secrets.licenseHashKey,
    events,
    webhooks,
    screenshots: new ScreenshotStore(
      s.config.dataDir,
      new ScreenshotRepository(s.sql),
      s.log,
      s.config.screenshotStoreBytes,
      now,
    ),
    geo: new ActivationGeo({ locator: s.geo, records: new GeoRepository(s.sql), log: s.log }),
  });
  const log = s.log;
  const apps = new AppsService(
    {
      repos: s.repos,
      licenseHashKey: s.secrets.licenseHashKey,
      allowPrivateWebhooks: s.config.allowPrivateWebhooks,
      log,
      now,
    },
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
    apps,
    audit: s.repos.audit,
  });
  let noncePurge: NodeJS.Timeout | undefined;
  const keys = new KeysAdminService(
    { audit: s.repos.audit, now },
    new KeyAdminRepository(s.sql, s.repos.keyTouches),
    apps,
    events,
  );
  return {
    auth: new DashboardAuth(dashboardAuthDeps(s, access)),
    access,
    apps,
    appCache,
    sessions,
    licenseOps,
    licenses,
    heartbeats,
    client,
    keys,
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
      },
      new TeamRepository(s.orm),
    ),
    webhooks,
    node,
    async start() {
      await appCache.start();
      await events.start();
      await access.start();
      await push.start();
      await node.start();
      const restored = await checkpoint?.restore();
      if (restored) s.log.info({ restored }, 'state.restored');
      checkpoint?.start();
      heartbeats.startSweeper();
      noncePurge = setInterval(() => {
        s.repos.nonces.purgeExpired(new Date(now())).catch((err: unknown) => s.log.warn({ err }, 'nonce.purge_failed'));
      }, NONCE_PURGE_MS).unref();
      // One process alone (no Redis) cannot race a live claim: recover every pending key.
      // With other workers around, only claims older than any live register can be dead.
      const recovered = await licenseOps.recoverPending(
        new Date(now() - (s.coordinator.kind === 'local' ? 0 : 60_000)),
      );
      if (recovered > 0) s.log.warn({ recovered }, 'license.pending_recovered');
    },
    async stop() {
      clearInterval(noncePurge);
      // Realtime channels end first (1001), so their clients reconnect to a worker that stays.
      await push.stop();
      // After the last request: what the sessions are now is what the next start continues from.
      await checkpoint?.stop();
      await webhooks.drain();
      // Hand every shard back (state is already durable with Redis), then stop answering calls.
      await node.close();
      heartbeats.close();
      licenses.close();
      await events.stop();
      await access.stop();
      await appCache.stop();
    },
  };
}

export function createApp(s: Services): App {
  const uws = loadUws();
  const metrics = new Metrics();
  const resolveIp = createClientIpResolver(s.config.trustedProxies);
  // PROTOCOL 11.20: every answer under /api/client/ leaves signed, the guard's and the fallback's too.
  const signClient = (method: string, path: string, nonce: string, reply: Reply): Reply =>
    path.startsWith('/api/client/') ? signReply(reply, s.secrets.signing, method, path, nonce, s.clock.now()) : reply;
  const server = createHttpServer(uws, {
    log: s.log,
    resolveIp,
    onReply: (route, method, status, startedAt) => metrics.observe(route, method, status, startedAt),
    finishError: signClient,
  });
  const router = new Router();
  const domain = createDomain(s);
  const deps: AppDeps = { s, domain, router, metrics };
  metrics.gauge(
    'keywarden_process_pid',
    "This worker's process id (tells workers sharing a port apart)",
    () => process.pid,
  );
  metrics.gauge('keywarden_cluster_members', 'Live workers this worker sees', () => domain.node.memberCount);
  metrics.gauge(
    'keywarden_cluster_owned_shards',
    'Shards whose lease this worker holds',
    () => domain.node.ownedShards,
  );
  metrics.gauge(
    'keywarden_cluster_forwarded_total',
    'Actor operations sent to the owning worker',
    () => domain.node.forwarded,
  );
  metrics.gauge(
    'keywarden_cluster_direct_total',
    'Forwarded operations sent over a direct connection to the owning worker',
    () => domain.node.directCalls,
  );
  metrics.gauge(
    'keywarden_cluster_pubsub_total',
    "Forwarded operations sent through Redis pub/sub (the owner's address unknown or unreachable)",
    () => domain.node.pubsubCalls,
  );
  metrics.gauge(
    'keywarden_cluster_local_total',
    'Actor operations run on this worker',
    () => domain.node.servedLocally,
  );
  metrics.gauge(
    'keywarden_heartbeat_sessions',
    'Heartbeat sessions hosted by this worker',
    () => domain.heartbeats.host.size,
  );
  metrics.gauge(
    'keywarden_heartbeat_live_actors',
    'Heartbeat sessions currently live actors (not passivated)',
    () => domain.heartbeats.host.liveActors,
  );
  metrics.gauge(
    'keywarden_heartbeat_refusals_unaudited_total',
    'Refused beats and starts answered without an audit line (at most one a minute per session is written)',
    () => domain.heartbeats.refusals.unaudited,
  );
  metrics.gauge(
    'keywarden_audit_queued',
    'Audit entries waiting to be written (they wait out a database outage)',
    () => s.repos.audit.queued,
  );
  metrics.gauge(
    'keywarden_audit_dropped_total',
    'Audit entries dropped because the queue overflowed during a database outage',
    () => s.repos.audit.dropped,
  );
  metrics.gauge('keywarden_license_live_actors', 'License-key actors currently live', () => domain.licenses.size);
  systemRoutes(deps);
  authRoutes(deps);
  appsRoutes(deps);
  clientRoutes(deps);
  keysRoutes(deps);
  teamRoutes(deps);
  const live = new LiveHub({
    log: s.log,
    auth: domain.auth,
    apps: domain.apps,
    events: domain.events,
    access: domain.access,
  });
  live.start();
  live.mount(server);
  const channel = new ClientChannel({
    log: s.log,
    now: () => s.clock.now(),
    client: clientDepsOf(deps),
    heartbeats: domain.heartbeats,
    push: domain.push,
    limiter: addressLimiter(s.coordinator, () => s.clock.now(), 'ws', 60),
    resolveIp,
  });
  channel.start();
  channel.mount(server);
  channelRoutes(deps);
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
