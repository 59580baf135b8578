import type { Logger } from 'pino';
import type { Router } from '../../platform/http/router.js';
import type { Metrics } from '../../platform/http/metrics.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { MAX_CLOCK_SKEW_MS } from '../../platform/cluster/cluster-node.js';
import { AppError } from '../../errors.js';
import { jsonReply, textReply } from '../../platform/http/types.js';
import { UNAVAILABLE_RETRY_AFTER_S } from '../../platform/http/error-reply.js';

const READY_TIMEOUT_MS = 1_000;

interface SystemRoutesDeps {
  metrics: Metrics;
  log: Logger;
  /** Readiness: the database answers. */
  database: { ping(): Promise<void> };
  coordinator: Pick<Coordinator, 'ping' | 'kind'>;
  /**
   * This host's clock minus the coordinator's, ms (0 with in-process coordination): past
   * MAX_CLOCK_SKEW_MS /readyz says so (still ready: a warning, not an outage).
   */
  clockSkewMs?: () => number;
}

export function systemRoutes(
  router: Router,
  { metrics, log, database, coordinator, clockSkewMs }: SystemRoutesDeps,
): void {
  router.add({
    method: 'get',
    path: '/healthz',
    doc: { summary: 'Liveness', tag: 'system', auth: 'none' },
    handler: async () => jsonReply(200, { status: 'ok' }),
  });
  router.add({
    method: 'get',
    path: '/readyz',
    doc: {
      summary: 'Readiness: database and coordination reachable',
      tag: 'system',
      auth: 'none',
      responses: { 200: 'Ready', 503: 'Not ready' },
    },
    handler: async () => {
      // Bounded: a stalled dependency makes the probe answer 503 quickly instead of hanging it.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`readiness check took over ${READY_TIMEOUT_MS} ms`)),
          READY_TIMEOUT_MS,
        );
      });
      try {
        await Promise.race([Promise.all([database.ping(), coordinator.ping()]), deadline]);
      } catch (err) {
        log.warn({ err }, 'http.not_ready');
        throw new AppError('unavailable', undefined, { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_S) });
      } finally {
        clearTimeout(timer);
      }
      const skew = clockSkewMs?.() ?? 0;
      if (Math.abs(skew) > MAX_CLOCK_SKEW_MS)
        return jsonReply(200, {
          status: 'ready',
          coordination: coordinator.kind,
          warnings: [`clock_skew: this host's clock is ${skew} ms off the Redis clock; synchronise it (NTP)`],
          clock_skew_ms: skew,
        });
      return jsonReply(200, { status: 'ready', coordination: coordinator.kind });
    },
  });
  router.add({
    method: 'get',
    path: '/metrics',
    doc: { summary: 'Prometheus metrics', tag: 'system', auth: 'none' },
    handler: async () => textReply(200, await metrics.registry.metrics(), metrics.registry.contentType),
  });
  router.add({
    method: 'get',
    path: '/api/openapi.json',
    doc: { summary: 'This document', tag: 'system', auth: 'none' },
    handler: async () => jsonReply(200, router.openApi({ title: 'Keywarden', version: '0.1.0' })),
  });
}
