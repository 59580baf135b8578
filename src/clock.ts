import fs from 'node:fs';

/** Time source; tests of drift and expiry pass a controllable one. Milliseconds since the epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Test hook (FAULT_CLOCK_FILE): this process's wall clock (Date.now(), new Date()) reads the number of
 * ms written in `file` ahead of the real one, re-read every 100 ms: a host's clock stepped by NTP or
 * `date -s`, for one process, without root and without touching the machine's clock. Like a real step,
 * it leaves the monotonic clock (performance.now(), timers) alone. docs/decisions.md "Clock steps in tests".
 */
export function followClockFile(file: string): void {
  const RealDate = Date;
  const realNow = Date.now.bind(Date);
  let offset = 0;
  const read = () => {
    try {
      const n = Number(fs.readFileSync(file, 'utf8').trim());
      offset = Number.isFinite(n) ? n : 0;
    } catch {
      offset = 0;
    }
  };
  read();
  class SteppedDate extends RealDate {
    constructor(...args: unknown[]) {
      // The other forms (a given time, fields) are not "now": passed as they came.
      super(...((args.length === 0 ? [realNow() + offset] : args) as [number]));
    }
    static override now(): number {
      return realNow() + offset;
    }
  }
  globalThis.Date = SteppedDate as DateConstructor;
  setInterval(read, 100).unref();
}
