// The HTTP metrics are counted in plain cells and read by prom-client at scrape time: what /metrics
// shows must be exactly what prom-client's own labelled counter and histogram show for the same
// requests, scrape after scrape.
import { describe, expect, it } from 'vitest';
import { Counter, Histogram, Registry } from 'prom-client';
import { Metrics } from '../../../src/platform/http/metrics.js';

const COUNTER = 'keywarden_http_requests_total';
const HISTOGRAM = 'keywarden_http_request_duration_seconds';

function reference() {
  const registry = new Registry();
  const requests = new Counter({
    name: COUNTER,
    help: 'HTTP requests answered',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: HISTOGRAM,
    help: 'Time from request to response',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  return { registry, requests, duration };
}

const lines = async (r: Registry, name: string) => (await r.getSingleMetricAsString(name)).split('\n').sort();

describe('HTTP metrics', () => {
  it('expose what prom-client would for the same requests, bucket edges included, over several scrapes', async () => {
    const ours = new Metrics();
    const ref = reference();
    const routes = ['/api/client/heartbeat', '/api/apps/:id', '/healthz'];
    const methods = ['get', 'post', 'patch'];
    const statuses = [200, 201, 400, 404, 503];
    const edges = [0.0005, 0.001, 0.0025, 0.1, 2.5, 3, 0];
    let seed = 3;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let scrape = 0; scrape < 4; scrape++) {
      for (let i = 0; i < 2_000; i++) {
        const route = routes[rand(routes.length)]!;
        const method = methods[rand(methods.length)]!;
        const status = statuses[rand(statuses.length)]!;
        const seconds = rand(4) === 0 ? edges[rand(edges.length)]! : rand(3_000_000) / 1e6;
        ours.observeSeconds(route, method, status, seconds);
        ref.requests.inc({ route, method, status: String(status) });
        ref.duration.observe({ route }, seconds);
      }
      expect(await lines(ours.registry, COUNTER)).toEqual(await lines(ref.registry, COUNTER));
      expect(await lines(ours.registry, HISTOGRAM)).toEqual(await lines(ref.registry, HISTOGRAM));
    }
    expect((await ours.registry.metrics()).includes(`${HISTOGRAM}_bucket{le="+Inf",route="/healthz"}`)).toBe(true);
  });
});
