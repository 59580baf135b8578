// The HTTP application: one uWebSockets.js server with every module's routes, the dashboard's live
// streams, the realtime client channel, the /metrics gauges and the signed 404/405 fallback, on the
// modules compose.ts built. Nothing here listens: main.ts does.
import { registerClusterGauges } from './platform/cluster/cluster-gauges.js';
import { createClientIpResolver } from './platform/http/client-ip.js';
import { signReply } from './platform/http/client-signing.js';
import { Metrics } from './platform/http/metrics.js';
import { Router } from './platform/http/router.js';
import { mountDashboard } from './platform/http/static.js';
import type { Reply } from './platform/http/types.js';
import { createHttpServer, loadUws, type HttpServer } from './platform/http/uws.js';
import { addressLimiter } from './platform/limits/compact-rate-limiter.js';
import { registerRuntimeGauges } from './platform/runtime/malloc-trim.js';
import { overseesAccount } from './modules/access/index.js';
import { createSystem } from './modules/system/index.js';
import type { LiveHub } from './modules/notify/index.js';
import type { ClientChannel } from './modules/realtime/index.js';
import { createDomain, type Domain } from './compose.js';
import type { Services } from './services.js';

export interface App {
  readonly live: LiveHub;
  readonly channel: ClientChannel;
  readonly server: HttpServer;
  readonly router: Router;
  readonly domain: Domain;
}

/** Gauges read at scrape time: what this worker holds and does. */
function registerGauges(metrics: Metrics, s: Services, d: Domain): void {
  registerRuntimeGauges(metrics, s.memoryTrim);
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
  // docs/protocol.md 11.20: every answer under /api/client/ leaves signed, the guard's and the fallback's too.
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
  // docs/protocol.md 14: the portal's one per-IP budget (sign-in and order pages), shared by every worker.
  const portalLimiter = addressLimiter(s.coordinator, now, 'portal', 20);
  d.commerce.mount(router, { auth, portalLimiter });
  d.portal.mount(router, { limiter: portalLimiter, trustedOrigins: auth.trustedOrigins });
  d.airgap.mount(router, { auth, portalCaller: d.portal.caller(auth.trustedOrigins) });
  d.team.mount(router, auth);
  d.jobs.mount(router, auth);
  d.releases.mount(router, { auth, gate, limit: d.client.limiter });
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
  router.mountFallback(server, s.log, signClient);
  return { server, router, domain, live, channel };
}
