// Prometheus metrics for /metrics. One registry per app instance (no module singleton).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'keywarden_http_requests_total',
    help: 'HTTP requests answered',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'keywarden_http_request_duration_seconds',
    help: 'Time from request to response',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'keywarden_' });
  }

  /** A gauge read at scrape time (cluster and actor numbers). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  observe(route: string, method: string, status: number, startedAt: bigint): void {
    this.requests.inc({ route, method, status: String(status) });
    this.duration.observe({ route }, Number(process.hrtime.bigint() - startedAt) / 1e9);
  }
}
