// The relay's lease store on a real directory with a clock the test moves: a lease lives 15 minutes
// from its last renewal, an expired one frees its seat and cannot be renewed, and a store reopened
// on the same directory (journal replayed) sees what the last one saw; a new license starts empty.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseStore } from '../../../src/modules/airgap/relay/lease-store.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-leases-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
const MIN = 60_000;

describe('lease store', () => {
  it('expires leases 15 minutes after their last renewal and frees their seats', async () => {
    let now = 1_000_000;
    const dir = path.join(root, 'expiry');
    const store = await LeaseStore.open({ dir, licenseId: 'L1', now: () => now });
    const a = (await store.acquire('a', 1))!;
    expect(a.expiresAt).toBe(now + 15 * MIN);
    expect(await store.acquire('b', 1)).toBeNull();
    now += 14 * MIN;
    expect((await store.renew(a.id))!.expiresAt).toBe(now + 15 * MIN);
    now += 14 * MIN;
    expect(await store.acquire('b', 1)).toBeNull(); // renewed: still held
    now += 1 * MIN + 1;
    expect(await store.renew(a.id)).toBeNull();
    expect(store.inUse()).toBe(0);
    const b = (await store.acquire('b', 1))!;
    expect(b.hwid).toBe('b');
    await store.close();

    const again = await LeaseStore.open({ dir, licenseId: 'L1', now: () => now });
    expect(again.leases().map((l) => l.id)).toEqual([b.id]);
    now += 15 * MIN;
    expect(again.inUse()).toBe(0);
    await again.close();
  });

  it('replays the journal of a store that never closed; leases of another license are dropped', async () => {
    const now = 5_000_000;
    const dir = path.join(root, 'journal');
    const first = await LeaseStore.open({ dir, licenseId: 'L1', now: () => now });
    const kept = (await first.acquire('kept', 3))!;
    const gone = (await first.acquire('gone', 3))!;
    expect(await first.release(gone.id)).toBe(true);
    // No close(): as after a kill, only the journal holds these changes.
    expect(fs.readFileSync(path.join(dir, 'leases.journal'), 'utf8').split('\n').filter(Boolean)).toHaveLength(3);
    const second = await LeaseStore.open({ dir, licenseId: 'L1', now: () => now });
    expect(second.leases().map((l) => [l.id, l.hwid])).toEqual([[kept.id, 'kept']]);
    await second.close();
    const other = await LeaseStore.open({ dir, licenseId: 'L2', now: () => now });
    expect(other.inUse()).toBe(0);
    await other.close();
  });
});
