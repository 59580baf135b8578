// Child of malloc-trim.test.ts (node --expose-gc --no-concurrent-array-buffer-sweeping --import tsx:
// dead Buffers' memory is freed within the collection, so what a trim finds does not depend on a
// background thread's timing). `none` and `trim`: leaves glibc's heap full of holes, the way a worker's
// native buffers do, and prints what its RSS did, without and with the trimmer. `limit`: three full
// collections with a counting stand-in for malloc_trim, and when each trim came.
import fs from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { hasFullCollection, startMallocTrim } from '../../../src/platform/runtime/malloc-trim.js';

const mode = process.argv[2] as 'none' | 'trim' | 'limit';
const gc = (globalThis as { gc?: () => void }).gc!;
const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]) * 1024;
const print = (v: unknown) => process.stdout.write(JSON.stringify(v));

/** Resolves once a full collection's entry has been handed to every observer. */
const collected = () =>
  new Promise<void>((resolve) => {
    const o = new PerformanceObserver((list) => {
      if (!hasFullCollection(list)) return;
      o.disconnect();
      setImmediate(resolve); // after the other observers' callbacks of this delivery
    });
    o.observe({ entryTypes: ['gc'] });
  });
async function fullCollection(): Promise<void> {
  const done = collected();
  gc();
  await done;
}
// A collection's performance entry reaches observers when the event loop next turns, and nothing
// else here makes it turn: this does, until the end.
const alive = setInterval(() => undefined, 5);
let trimmed: (() => void) | undefined;
const nextTrim = () => new Promise<void>((resolve) => (trimmed = resolve));

if (mode === 'limit') {
  const calls: number[] = [];
  const interval = 1_000;
  const trimmer = startMallocTrim({ minIntervalMs: interval, onTrim: () => trimmed?.() }, () => {
    calls.push(performance.now());
    return 1;
  })!;
  const first = nextTrim();
  const collectedAt = performance.now();
  await fullCollection();
  await first;
  const second = nextTrim();
  await fullCollection(); // right after the first trim: waits for the interval
  const atSecond = calls.length;
  await fullCollection(); // and this one joins it: one trim for both
  await second;
  trimmer.stop();
  print({ calls: calls.length, atSecond, collectedAt, first: calls[0], second: calls[1], interval });
} else {
  const trimmer = mode === 'trim' ? startMallocTrim({ minIntervalMs: 0, onTrim: () => trimmed?.() }) : null;
  if (mode === 'trim' && !trimmer) throw new Error('malloc_trim is not callable here');
  const settle = async () => {
    const trim = trimmer ? nextTrim() : undefined;
    await fullCollection();
    await trim;
  };
  await settle(); // what start-up left
  const base = rss();
  // 30,000 blocks of 2,000 bytes (below the mmap threshold: they come from the heap); every 20th is
  // kept, so no freed stretch reaches the heap's top and glibc cannot give any of it back by itself.
  let blocks: Buffer[] | null = Array.from({ length: 30_000 }, () => Buffer.allocUnsafeSlow(2_000).fill(1));
  const kept = blocks.filter((_, i) => i % 20 === 0);
  const peak = rss();
  blocks = null;
  await settle();
  print({ base, peak, after: rss(), kept: kept.length, trims: trimmer?.trims ?? 0 });
}
clearInterval(alive);
