// Prometheus metrics for /metrics. One registry per app instance (no module singleton).
// The per-request HTTP metrics are counted in plain per-route cells and handed to prom-client
// only when /metrics is read: prom-client's labelled inc/observe hash the label object and
// validate it on every call, a few percent of a heartbeat's cost.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Requests of one route, method and status answered since the last scrape. */
interface CountCell {
  labels: { route: string; method: string; status: string };
  pending: number;
}

/** One route's durations since the start: count per bucket (the last is +Inf), sum and count. */
interface TimeCell {
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * keywarden_http_request_duration_seconds as prom-client reads a histogram (name, help, type,
 * values), kept in TimeCells: an observation is an array increment, not a labelled observe().
 */
class RouteDurations {
  readonly name = 'keywarden_http_request_duration_seconds';
  readonly help = 'Time from request to response';
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly byRoute = new Map<string, TimeCell>();

  observe(route: string, seconds: number): void {
    let cell = this.byRoute.get(route);
    if (!cell) {
      cell = { buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      this.byRoute.set(route, cell);
    }
    let b = 0;
    while (b < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[b]!) b++;
    cell.buckets[b]!++;
    cell.sum += seconds;
    cell.count++;
  }

  get() {
    const bucket = `${this.name}_bucket`;
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const [route, cell] of this.byRoute) {
      let acc = 0;
      for (let b = 0; b < DURATION_BUCKETS.length; b++) {
        acc += cell.buckets[b]!;
        values.push({ labels: { le: DURATION_BUCKETS[b]!, route }, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', route }, value: cell.count, metricName: bucket });
      values.push({ labels: { route }, value: cell.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { route }, value: cell.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  reset(): void {
    this.byRoute.clear();
  }
}

export class Metrics {
  readonly registry = new Registry();
  /** By route, method and status: what the requests counter has not been told yet. */
  private readonly counts = new Map<string, Map<string, Map<number, CountCell>>>();
  private readonly durations = new RouteDurations();

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'keywarden_' });
    const counts = this.counts;
    new Counter({
      name: 'keywarden_http_requests_total',
      help: 'HTTP requests answered',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [this.registry],
      collect() {
        for (const byMethod of counts.values())
          for (const byStatus of byMethod.values())
            for (const cell of byStatus.values()) {
              if (cell.pending === 0) continue;
              this.inc(cell.labels, cell.pending);
              cell.pending = 0;
            }
      },
    });
    // Read like any prom-client metric (it has what the registry reads: name, help, type, get).
    this.registry.registerMetric(this.durations as unknown as Histogram);
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

  /** A counter read at scrape time from a running total (what a module counts without prom-client). */
  counter(name: string, help: string, read: () => number): void {
    let told = 0;
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        const now = read();
        if (now > told) this.inc(now - told);
        told = now;
      },
    });
  }

  observe(route: string, method: string, status: number, startedAt: bigint): void {
    this.observeSeconds(route, method, status, Number(process.hrtime.bigint() - startedAt) / 1e9);
  }

  observeSeconds(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.counts.get(route);
    if (!byMethod) this.counts.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let cell = byStatus.get(status);
    if (!cell) byStatus.set(status, (cell = { labels: { route, method, status: String(status) }, pending: 0 }));
    cell.pending++;
    this.durations.observe(route, seconds);
  }
}
