// The ORM's AsyncLocalStorage contexts are enabled only while one of their runs is in flight
// (platform/db/async-context.ts): on Node before 24 an enabled instance makes every promise of the
// process pay async_hooks. `enabled` is Node's own field on the hook-based implementation.
import { AsyncLocalStorage } from 'node:async_hooks';
import { TransactionContext, type EntityManager } from '@mikro-orm/core';
import { describe, expect, it } from 'vitest';
import { hookBasedAsyncContext, scopeAsyncContexts } from '../../../src/platform/db/async-context.js';

const hookBased = hookBasedAsyncContext();
const enabled = (s: AsyncLocalStorage<unknown>) => (s as unknown as { enabled: boolean }).enabled;

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('which runtimes ride AsyncLocalStorage on async_hooks', () => {
  it('Node 20 and 22 do, unless told to use AsyncContextFrame; Node 24 does not, unless told not to', () => {
    expect(hookBasedAsyncContext('20.20.2', [])).toBe(true);
    expect(hookBasedAsyncContext('22.12.0', [])).toBe(true);
    expect(hookBasedAsyncContext('22.12.0', ['--experimental-async-context-frame'])).toBe(false);
    expect(hookBasedAsyncContext('24.1.0', [])).toBe(false);
    expect(hookBasedAsyncContext('24.1.0', ['--no-async-context-frame'])).toBe(true);
  });
});

describe.skipIf(!hookBased)('scoped AsyncLocalStorage', () => {
  scopeAsyncContexts();

  it('is enabled while a run is in flight and disabled once it settled', async () => {
    const s = new AsyncLocalStorage<string>();
    const gate = deferred();
    const run = s.run('a', async () => {
      await gate.promise;
      return s.getStore();
    });
    expect(enabled(s)).toBe(true);
    gate.resolve();
    expect(await run).toBe('a');
    expect(enabled(s)).toBe(false);
  });

  it('keeps overlapping runs in their own stores until the last one settles', async () => {
    const s = new AsyncLocalStorage<string>();
    const first = deferred();
    const second = deferred();
    const a = s.run('a', async () => {
      await first.promise;
      return s.getStore();
    });
    const b = s.run('b', async () => {
      await second.promise;
      return s.getStore();
    });
    second.resolve();
    expect(await b).toBe('b');
    expect(enabled(s)).toBe(true); // `a` is still in flight
    first.resolve();
    expect(await a).toBe('a');
    expect(enabled(s)).toBe(false);
  });

  it('settles a run that throws or rejects, and one that returns at once', async () => {
    const s = new AsyncLocalStorage<string>();
    expect(() =>
      s.run('x', () => {
        throw new Error('sync');
      }),
    ).toThrow('sync');
    expect(enabled(s)).toBe(false);
    await expect(
      s.run('y', async () => {
        await Promise.resolve();
        throw new Error('async');
      }),
    ).rejects.toThrow('async');
    expect(enabled(s)).toBe(false);
    expect(s.run('z', () => s.getStore())).toBe('z');
    expect(enabled(s)).toBe(false);
  });

  it("MikroORM's transaction context: each transaction sees its own manager across awaits, then none", async () => {
    const storage = (TransactionContext as unknown as { storage: AsyncLocalStorage<unknown> }).storage;
    const emA = { name: 'default', id: 'a' } as unknown as EntityManager;
    const emB = { name: 'default', id: 'b' } as unknown as EntityManager;
    const gate = deferred();
    const a = TransactionContext.create(emA, async () => {
      await gate.promise;
      return TransactionContext.getEntityManager('default');
    });
    const b = await TransactionContext.create(emB, async () => {
      await Promise.resolve();
      return TransactionContext.getEntityManager('default');
    });
    expect(b).toBe(emB);
    gate.resolve();
    expect(await a).toBe(emA);
    expect(enabled(storage)).toBe(false);
    expect(TransactionContext.getEntityManager('default')).toBeUndefined();
  });
});
