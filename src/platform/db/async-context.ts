// MikroORM keeps three contexts in AsyncLocalStorage: the flush under way, the transaction and a raw
// fragment's stack setting. On Node before 24 (without --experimental-async-context-frame),
// AsyncLocalStorage is built on async_hooks: from the first run() of any instance on, every promise
// the process creates pays an init hook and a context copy, for the rest of its life. The ORM runs
// for dashboard calls; the heartbeats, which never touch it, paid 10-15% of their CPU for it
// (bench/README.md "Where the time goes"). So an instance is disabled again (Node: "exits all
// current contexts", and the hooks go off with the last enabled instance) once none of its run()
// calls is in flight: the hooks are on only while the ORM works.
//
// Sound for a run() whose callback's work is over when its result settles: the ORM's flush,
// transaction and fragment runs await everything they start. A callback that left work behind
// reading the store later would read undefined; enterWith(), which has no end, keeps its instance
// enabled for good.
import { AsyncLocalStorage } from 'node:async_hooks';

/** Whether this runtime's AsyncLocalStorage rides on async_hooks (Node 24 uses AsyncContextFrame). */
export function hookBasedAsyncContext(
  version = process.versions.node,
  flags: readonly string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS?.split(/\s+/) ?? [])],
): boolean {
  const major = Number(version.split('.')[0]);
  if (flags.includes('--no-async-context-frame')) return true;
  return major < 24 && !flags.includes('--experimental-async-context-frame');
}

/** Runs of each instance in flight. */
const inFlight = new WeakMap<AsyncLocalStorage<unknown>, number>();
let installed = false;

function settled(storage: AsyncLocalStorage<unknown>): void {
  const n = (inFlight.get(storage) ?? 1) - 1;
  if (n > 0) {
    inFlight.set(storage, n);
    return;
  }
  inFlight.delete(storage);
  storage.disable();
}

/**
 * Makes every AsyncLocalStorage of this process enabled only while one of its run() calls is in
 * flight. Idempotent; does nothing where AsyncLocalStorage does not use async_hooks.
 */
export function scopeAsyncContexts(): void {
  if (installed || !hookBasedAsyncContext()) return;
  installed = true;
  const run = AsyncLocalStorage.prototype.run;
  AsyncLocalStorage.prototype.run = function scopedRun<R, A extends unknown[]>(
    this: AsyncLocalStorage<unknown>,
    store: unknown,
    callback: (...args: A) => R,
    ...args: A
  ): R {
    inFlight.set(this, (inFlight.get(this) ?? 0) + 1);
    let result: R;
    try {
      result = run.call(this, store, callback, ...args) as R;
    } catch (err) {
      settled(this);
      throw err;
    }
    const then = (result as { then?: unknown } | null)?.then;
    if (typeof then === 'function') {
      then.call(
        result,
        () => settled(this),
        () => settled(this),
      );
    } else settled(this);
    return result;
  } as typeof run;
}
