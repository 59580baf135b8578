// The client module's public surface: the client API's gate, sessions and shared request shapes.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Metrics } from '../../platform/http/metrics.js';
import type { Router } from '../../platform/http/router.js';
import type { AuditRepository } from '../audit/index.js';
import { ClientAppCache } from './client-app-cache.js';
import type { ClientDeps } from './client-gate.js';
import { ClientSessions, type ShardOwnership } from './client-sessions.js';
import { clientKeysRoute, clientLimiter } from './client.routes.js';
import { NonceRepository } from './nonce.repository.js';

export type { CachedApp, ClientAppCache, ClientAppRow } from './client-app-cache.js';
export type { ClientSessions };
export { type Admittee, refusalOf } from './admission.js';
export { type AuditNote, type ClientCall, type ClientOutcome, outcome } from './client-call.js';
export { clientCallRunner, clientHandler, noteEchoedRoute, type ClientDeps, type ClientInput } from './client-gate.js';
export {
  BeatBody,
  type BeatRequest,
  InitBody,
  type InitRequest,
  LicenseBody,
  type LicenseRequest,
  LoginBody,
  type LoginRequest,
  OfflineBody,
  type OfflineRequest,
  RegisterBody,
  type RegisterRequest,
  StartBody,
  type StartRequest,
  StopBody,
  type StopRequest,
  TrialBody,
  type TrialRequest,
} from './client-requests.js';
export { type ClientSession, SESSION_KEY_PREFIX } from './client-sessions.js';
export { normalizeHwid } from './hwid.js';
export { clientDoc, type RequestLimiterFactory } from './client.routes.js';

/** How often expired request nonces are deleted (each lives 600 s; a claim takes over an expired row anyway). */
const NONCE_PURGE_MS = 60_000;

interface ClientModuleDeps {
  sql: Sql;
  log: Logger;
  now: () => number;
  coordinator: Coordinator;
  audit: AuditRepository;
  node: ShardOwnership;
  /** Secrets.sessionTokenKey: shared by every worker of the deployment. */
  sessionTokenKey: Uint8Array;
  signingKey: () => ResponseSigningKey;
  publishedKeys: () => readonly ResponseSigningKey[];
  /** CLIENT_SESSION_LIMIT. */
  sessionLimit: number;
  /** The apps module's reads of an application and its blacklist (ports compose.ts fills). */
  apps: ConstructorParameters<typeof ClientAppCache>[0];
  blacklist: ConstructorParameters<typeof ClientAppCache>[1];
  /** Balancer affinity (AFFINITY_ROUTE): this worker's route and the route of a session's owner. */
  affinity?: { own: string; routeOf(session: string): string | undefined };
}

/** Builds the client module: the application cache, client sessions and the gate every client call passes. */
export function createClient(d: ClientModuleDeps) {
  const appCache = new ClientAppCache(d.apps, d.blacklist, d.coordinator, d.now);
  // Sealed session tokens, drawn on shards this worker owns (session affinity).
  const sessions = new ClientSessions({
    coordinator: d.coordinator,
    now: d.now,
    tokenKey: d.sessionTokenKey,
    limit: d.sessionLimit,
    node: d.node,
  });
  const nonces = new NonceRepository(d.sql);
  // What every client call needs: the REST routes and the realtime channel's calls.
  const gate: ClientDeps = {
    log: d.log,
    now: d.now,
    apps: appCache,
    sessions,
    audit: d.audit,
    nonces,
    signingKey: d.signingKey,
    ...(d.affinity ? { affinity: { ...d.affinity, counts: { echoed: 0, reached: 0 } } } : {}),
  };
  let noncePurge: NodeJS.Timeout | undefined;
  const affinity = gate.affinity;
  return {
    appCache,
    sessions,
    gate,
    limiter: clientLimiter(d.coordinator, d.now),
    mount(router: Router): void {
      clientKeysRoute(router, { signingKey: d.signingKey, publishedKeys: d.publishedKeys, now: d.now });
    },
    /** How often balancer affinity worked (with AFFINITY_ROUTE). */
    gauges(metrics: Pick<Metrics, 'gauge'>): void {
      if (!affinity) return;
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
    },
    start: () => appCache.start(),
    startPurge(): void {
      noncePurge = setInterval(() => {
        nonces.purgeExpired(new Date(d.now())).catch((err: unknown) => d.log.warn({ err }, 'nonce.purge_failed'));
      }, NONCE_PURGE_MS).unref();
    },
    stopPurge: () => clearInterval(noncePurge),
    stop: () => appCache.stop(),
  };
}
