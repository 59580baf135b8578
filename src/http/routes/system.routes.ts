import type { AppDeps } from '../../app.js';
import { AppError } from '../../errors.js';
import { jsonReply, textReply } from '../types.js';

export function systemRoutes({ router, s, metrics }: AppDeps): void {
  router.add({
    method: 'get', path: '/healthz', doc: { summary: 'Liveness', tag: 'system', auth: 'none' },
    handler: async () => jsonReply(200, { status: 'ok' }),
  });
  router.add({
    method: 'get', path: '/readyz', doc: { summary: 'Readiness: database and coordination reachable', tag: 'system', auth: 'none', responses: { 200: 'Ready', 503: 'Not ready' } },
    handler: async () => {
      try {
        await Promise.all([s.sql.one('select 1'), s.coordinator.ping()]);
      } catch (err) {
        s.log.warn({ err }, 'http.not_ready');
        throw new AppError('unavailable');
      }
      return jsonReply(200, { status: 'ready', coordination: s.coordinator.kind });
    },
  });
  router.add({
    method: 'get', path: '/metrics', doc: { summary: 'Prometheus metrics', tag: 'system', auth: 'none' },
    handler: async () => textReply(200, await metrics.registry.metrics(), metrics.registry.contentType),
  });
  router.add({
    method: 'get', path: '/api/openapi.json', doc: { summary: 'This document', tag: 'system', auth: 'none' },
    handler: async () => jsonReply(200, router.openApi({ title: 'Keywarden', version: '0.1.0' })),
  });
}
