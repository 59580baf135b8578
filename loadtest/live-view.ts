// What the terminal shows while a run goes: a status line and the last seconds as a small table
// (clients, calls a second, p50/p99, errors, server CPU), redrawn in place on a terminal; on a
// pipe or CI log, one plain line every 5 seconds instead.
import type { Tick } from './generator.js';
import type { ServerSample } from './server-metrics.js';

const ROWS = 6;
const HEADER =
  `${'t'.padStart(6)} ${'clients'.padStart(7)} ${'ok/s'.padStart(7)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ` +
  `${'errors'.padStart(6)} ${'prep/s'.padStart(6)} ${'CPU'.padStart(6)}`;

export interface LiveHeader {
  title: string;
  duration: number;
}

function ms(us: number): string {
  if (!us) return '-';
  return us >= 100_000 ? (us / 1000).toFixed(0) : (us / 1000).toFixed(1);
}

function errorsOf(t: Tick): number {
  return t.non2xx + t.errors + t.prep_fail + t.bad_sig + t.bad_proof;
}

export class LiveView {
  private readonly rows: string[] = [];
  private drawn = 0;
  private lastPlain = 0;
  private readonly tty: boolean;

  constructor(
    private readonly h: LiveHeader,
    enabled: boolean,
    private readonly out: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = enabled && Boolean(out.isTTY);
  }

  /** A message above the live block (or a plain line). */
  say(msg: string): void {
    this.clear();
    this.out.write(`${msg}\n`);
    this.draw();
  }

  private block: string[] = [];

  private clear(): void {
    if (this.drawn) this.out.write(`\x1b[${this.drawn}A\x1b[J`); // cursor up over the block, erase to the end
    this.drawn = 0;
  }

  private draw(): void {
    if (!this.tty || !this.block.length) return;
    this.out.write(`${this.block.join('\n')}\n`);
    this.drawn = this.block.length;
  }

  update(t: Tick, server: ServerSample | undefined, note = ''): void {
    const cpu = server ? `${Math.round(server.cpu * 100)}%` : '-';
    const row =
      `${String(t.t).padStart(5)}s ${String(t.clients).padStart(7)} ${String(t.ok).padStart(7)} ${ms(t.p50_us).padStart(7)} ` +
      `${ms(t.p99_us).padStart(7)} ${String(errorsOf(t)).padStart(6)} ${String(t.prep_ok).padStart(6)} ${cpu.padStart(6)}`;
    this.rows.push(row);
    if (this.rows.length > ROWS) this.rows.shift();
    const bar = Math.round((20 * Math.min(t.t, this.h.duration)) / this.h.duration);
    const status =
      `${this.h.title}  ${t.t}/${this.h.duration} s [${'#'.repeat(bar)}${'.'.repeat(20 - bar)}]  clients ${t.clients}/${t.target}  ` +
      `${t.ok} ok/s  p50 ${ms(t.p50_us)} ms  p99 ${ms(t.p99_us)} ms  errors ${errorsOf(t)}  server CPU ${cpu}${note ? `  ${note}` : ''}`;
    if (!this.tty) {
      if (t.t - this.lastPlain >= 5 || t.t >= this.h.duration) {
        this.lastPlain = t.t;
        this.out.write(`${status}\n`);
      }
      return;
    }
    this.block = [status, HEADER, ...this.rows];
    this.clear();
    this.draw();
  }

  /** Leaves the last block on screen and stops drawing. */
  end(): void {
    this.drawn = 0;
    this.block = [];
  }
}
