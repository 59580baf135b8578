// The server's side of the run, from its /metrics when the deployment lets us read it: CPU in
// use, resident memory, live heartbeat sessions and channel connections. Behind one port a
// cluster answers from whichever worker took the connection, so each worker (by its pid) keeps
// its own last two samples and the figures are the sums over the workers seen.
import { parseMetrics } from '../bench/lib.js';
import type { HttpClient } from './http-client.js';

export interface ServerSample {
  /** seconds since the run started */
  t: number;
  /** CPU in use over the last interval, cores (1 = one core busy), summed over workers */
  cpu: number;
  rssBytes: number;
  workers: number;
  sessions: number;
  channels: number;
}

interface WorkerState {
  cpu: number;
  at: number;
  rate: number;
  rss: number;
  sessions: number;
  channels: number;
}

export class ServerMetrics {
  readonly samples: ServerSample[] = [];
  private readonly workers = new Map<number, WorkerState>();
  private timer?: NodeJS.Timeout;
  private busy = false;
  /** why /metrics is not used (unreachable, not Keywarden's), once known */
  unavailable?: string;

  constructor(
    private readonly http: HttpClient,
    private readonly t0: number,
  ) {}

  start(everyMs = 1000): void {
    void this.scrape();
    this.timer = setInterval(() => void this.scrape(), everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The latest sample, if any. */
  get last(): ServerSample | undefined {
    return this.samples[this.samples.length - 1];
  }

  /** Mean CPU (cores) over samples taken between from and to (seconds since the start). */
  cpuBetween(from: number, to: number): number | undefined {
    const s = this.samples.filter((x) => x.t > from && x.t <= to + 0.5);
    return s.length ? s.reduce((a, x) => a + x.cpu, 0) / s.length : undefined;
  }

  private async scrape(): Promise<void> {
    if (this.busy || this.unavailable) return;
    this.busy = true;
    try {
      // a fresh connection each time, so a cluster's kernel balancing shows every worker in turn
      const r = await this.http.request('GET', '/metrics', { timeoutMs: 3000, close: true });
      if (r.status !== 200) {
        this.unavailable = `GET /metrics answered HTTP ${r.status}`;
        return;
      }
      const m = parseMetrics(r.text);
      const pid = m.keywarden_process_pid;
      const cpu = m.keywarden_process_cpu_seconds_total;
      if (pid === undefined || cpu === undefined) {
        this.unavailable = 'GET /metrics has no keywarden_process_* series';
        return;
      }
      const at = (Date.now() - this.t0) / 1000;
      const prev = this.workers.get(pid);
      const rate = prev && at > prev.at ? Math.max(0, (cpu - prev.cpu) / (at - prev.at)) : (prev?.rate ?? 0);
      this.workers.set(pid, {
        cpu,
        at,
        rate,
        rss: m.keywarden_process_resident_memory_bytes ?? 0,
        sessions: m.keywarden_heartbeat_sessions ?? 0,
        channels: m.keywarden_channel_connections ?? 0,
      });
      if (!prev) return; // a rate needs two samples of the same worker
      const all = [...this.workers.values()];
      this.samples.push({
        t: at,
        cpu: all.reduce((a, w) => a + w.rate, 0),
        rssBytes: all.reduce((a, w) => a + w.rss, 0),
        workers: all.length,
        sessions: all.reduce((a, w) => a + w.sessions, 0),
        channels: all.reduce((a, w) => a + w.channels, 0),
      });
    } catch (err) {
      if (!this.samples.length) this.unavailable = `GET /metrics: ${(err as Error).message}`;
    } finally {
      this.busy = false;
    }
  }
}
