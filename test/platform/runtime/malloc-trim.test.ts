// Freed C-heap memory goes back to the kernel after full collections (MEMORY_TRIM_MS). The heap part
// runs in a child process with --expose-gc (fragment-heap.ts), whose RSS is its own to read: glibc
// keeps the holes without the trimmer and gives them back with it. The server part: the trimmer is on
// by default, counted on /metrics, and off with MEMORY_TRIM_MS=0.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { TRIM_AFTER_COLLECTION_MS, loadMallocTrim } from '../../../src/platform/runtime/malloc-trim.js';
import { startTestServer } from '../../helpers/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const glibc = loadMallocTrim() !== null;

async function child<T>(mode: 'none' | 'trim' | 'limit'): Promise<T> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--expose-gc',
      '--no-concurrent-array-buffer-sweeping',
      '--import',
      'tsx',
      path.join(here, 'fragment-heap.ts'),
      mode,
    ],
    { timeout: 60_000 },
  );
  return JSON.parse(stdout) as T;
}

interface HeapRun {
  base: number;
  peak: number;
  after: number;
  trims: number;
}

describe.skipIf(!glibc && !process.env.REQUIRE_SERVICES)('malloc trim', () => {
  it('is callable here (Linux with glibc, koffi loaded)', () => {
    expect(glibc).toBe(true);
  });

  it('gives back the holes glibc keeps after a full collection', async () => {
    const [without, withTrim] = [await child<HeapRun>('none'), await child<HeapRun>('trim')];
    // About 60 MB were allocated, 57 of them freed between blocks still in use.
    for (const r of [without, withTrim]) expect(r.peak - r.base).toBeGreaterThan(40 * 2 ** 20);
    // Without the trimmer glibc keeps nearly all of it: what makes the trimmer worth having.
    expect(without.after - without.base).toBeGreaterThan(0.8 * (without.peak - without.base));
    expect(without.trims).toBe(0);
    // With it, most of it is back with the kernel once the collection is over.
    expect(withTrim.after - withTrim.base).toBeLessThan(0.4 * (withTrim.peak - withTrim.base));
    expect(withTrim.trims).toBeGreaterThanOrEqual(2); // after start-up's collection and after this one
  });

  it('trims after a collection, at most once per interval: collections sooner share one trim when it has passed', async () => {
    const r = await child<{
      calls: number;
      atSecond: number;
      collectedAt: number;
      first: number;
      second: number;
      interval: number;
    }>('limit');
    // The first trim waits for V8's background freeing; the second and third collections, within
    // the interval after it, are followed by one trim together once the interval has passed. (A timer
    // counts from the event loop's clock, read when the loop last woke, so it may fire a few ms early
    // by performance.now(); without the waits these gaps would be a few ms in all.)
    expect(r.first - r.collectedAt).toBeGreaterThanOrEqual(TRIM_AFTER_COLLECTION_MS - 50);
    expect(r.atSecond).toBe(1);
    expect(r.calls).toBe(2);
    expect(r.second - r.first).toBeGreaterThanOrEqual(r.interval - 50);
  });

  it('runs in the server by default, counted on /metrics; MEMORY_TRIM_MS=0 turns it off', async () => {
    const on = await startTestServer();
    try {
      const trimmer = on.server.services.memoryTrim;
      expect(trimmer).not.toBeNull();
      trimmer!.trimNow();
      const text = await (await fetch(`${on.base}/metrics`)).text();
      const count = Number(/^keywarden_memory_trims_total (\d+)/m.exec(text)?.[1]);
      expect(count).toBeGreaterThanOrEqual(1);
      expect(text).toMatch(/^keywarden_memory_trim_seconds_total \d/m);
    } finally {
      await on.close();
    }
    const off = await startTestServer({ MEMORY_TRIM_MS: '0' });
    try {
      expect(off.server.services.memoryTrim).toBeNull();
      expect(await (await fetch(`${off.base}/metrics`)).text()).not.toContain('keywarden_memory_trims_total');
    } finally {
      await off.close();
    }
  });
});
