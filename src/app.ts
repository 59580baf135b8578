// createApp builds the HTTP application from services; it does not listen (STYLE 9).
import type { Services } from './services.js';
import { AppError } from './errors.js';
import { createClientIpResolver } from './http/client-ip.js';
import { Metrics } from './http/metrics.js';
import { Router } from './http/router.js';
import { createHttpServer, loadUws, type HttpServer } from './http/uws.js';
import { systemRoutes } from './http/routes/system.routes.js';
import { authRoutes } from './http/routes/auth.routes.js';
import { appsRoutes } from './http/routes/apps.routes.js';
import { DashboardAuth } from './services/dashboard-auth.service.js';
import { AppsService } from './services/apps.service.js';

export interface Domain {
  auth: DashboardAuth;
  apps: AppsService;
}

export interface AppDeps {
  s: Services;
  domain: Domain;
  router: Router;
  metrics: Metrics;
}

export interface App {
  readonly server: HttpServer;
  readonly router: Router;
  readonly domain: Domain;
}

export function createDomain(s: Services): Domain {
  return { auth: new DashboardAuth(s), apps: new AppsService(s) };
}

export function createApp(s: Services): App {
  const uws = loadUws();
  const metrics = new Metrics();
  const server = createHttpServer(uws, {
    log: s.log,
    resolveIp: createClientIpResolver(s.config.trustedProxies),
    onReply: (route, method, status, startedAt) => metrics.observe(route, method, status, startedAt),
  });
  const router = new Router();
  const domain = createDomain(s);
  const deps: AppDeps = { s, domain, router, metrics };
  systemRoutes(deps);
  authRoutes(deps);
  appsRoutes(deps);
  router.mount(server);
  server.mountFallback(async () => {
    throw new AppError('route_not_found');
  });
  return { server, router, domain };
}
