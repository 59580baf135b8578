// Gives the C heap's free pages back to the kernel after V8's full collections. glibc returns freed
// memory to the system only from the top of its heap (MALLOC_TRIM_THRESHOLD_): what is freed below a
// block still in use stays in the process's RSS until malloc_trim() walks the heap. Native memory a
// worker allocates and frees by the million (socket reads and writes, every Redis call's buffers, V8's
// ArrayBuffer backing stores) ends up so: two cluster workers holding 20,000 channel clients kept about
// 6.3 KB of RSS per client, 3.6-3.8 KB once trimmed (bench/README.md "Where a channel client's memory
// goes").
// Node has no binding for malloc_trim; koffi (a foreign-function interface with prebuilt binaries)
// calls it. Where it cannot (not glibc, no koffi build for the platform) nothing is trimmed and the
// server runs as before.
import { createRequire } from 'node:module';
import type { Metrics } from '../http/metrics.js';
import { PerformanceObserver, constants, performance, type PerformanceObserverEntryList } from 'node:perf_hooks';

/**
 * How long after a full collection its trim waits: V8 frees dead ArrayBuffers' memory on a background
 * thread once the collection is over (concurrent array buffer sweeping), and a trim before that finds
 * their memory still in use.
 */
export const TRIM_AFTER_COLLECTION_MS = 250;

/** Whether a delivery of 'gc' entries holds a full (mark-compact) collection. */
export function hasFullCollection(list: PerformanceObserverEntryList): boolean {
  // Node's typings leave a gc entry's detail out.
  return list
    .getEntries()
    .some((e) => (e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR);
}

/** libc's `int malloc_trim(size_t pad)`: 1 when memory was given back. */
type TrimCall = (pad: number) => number;

/** libc's malloc_trim, or null where there is none to call (not Linux with glibc). */
export function loadMallocTrim(): TrimCall | null {
  if (process.platform !== 'linux') return null;
  try {
    // Required here, not imported: koffi loads its native part when first required, and a platform
    // it has no build for must not stop the server. musl has no libc.so.6: that load throws too.
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    return koffi.load('libc.so.6').func('int malloc_trim(size_t)') as TrimCall;
  } catch {
    return null;
  }
}

interface MallocTrimOptions {
  /**
   * Shortest time between two trims (MEMORY_TRIM_MS). Full collections sooner than that after the
   * last trim are followed by one trim when the time has passed, so the last garbage is trimmed too.
   */
  readonly minIntervalMs: number;
  /** After each trim, with the seconds it took (the event loop waits for it). */
  readonly onTrim?: (seconds: number) => void;
}

export interface MallocTrimmer {
  /** Trims done so far. */
  readonly trims: number;
  /** Seconds they took in all. */
  readonly seconds: number;
  /** Trims at once, whenever the last trim was (a process asked to settle its memory: benchmarks). */
  trimNow(): void;
  /** Stops observing collections and drops a trim that was waiting. Idempotent. */
  stop(): void;
}

/**
 * Trims a quarter of a second after every full (mark-compact) collection, at most once per
 * `minIntervalMs`. A full collection is when V8 lets go of the native memory of what died (backing
 * stores of dead Buffers), and it comes often enough under load and rarely when idle. Null where
 * malloc_trim cannot be called.
 */
export function startMallocTrim(opts: MallocTrimOptions, trim = loadMallocTrim()): MallocTrimmer | null {
  if (!trim) return null;
  let last = -Infinity;
  let waiting: NodeJS.Timeout | undefined;
  let trims = 0;
  let seconds = 0;
  const run = () => {
    waiting = undefined;
    const start = performance.now();
    trim(0);
    last = performance.now();
    const took = (last - start) / 1000;
    trims++;
    seconds += took;
    opts.onTrim?.(took);
  };
  const observer = new PerformanceObserver((list) => {
    if (waiting || !hasFullCollection(list)) return;
    waiting = setTimeout(
      run,
      Math.max(TRIM_AFTER_COLLECTION_MS, last + opts.minIntervalMs - performance.now()),
    ).unref();
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    get trims() {
      return trims;
    },
    get seconds() {
      return seconds;
    },
    trimNow() {
      clearTimeout(waiting);
      run();
    },
    stop() {
      observer.disconnect();
      clearTimeout(waiting);
      waiting = undefined;
    },
  };
}

/** The process's own numbers at scrape time: its pid, and what the trimmer gave back (when it runs). */
export function registerRuntimeGauges(metrics: Pick<Metrics, 'gauge' | 'counter'>, trim: MallocTrimmer | null): void {
  metrics.gauge(
    'keywarden_process_pid',
    "This worker's process id (tells workers sharing a port apart)",
    () => process.pid,
  );
  if (!trim) return;
  metrics.counter(
    'keywarden_memory_trims_total',
    'Free C-heap pages given back after full collections',
    () => trim.trims,
  );
  metrics.counter(
    'keywarden_memory_trim_seconds_total',
    'Time the event loop spent giving them back',
    () => trim.seconds,
  );
}
