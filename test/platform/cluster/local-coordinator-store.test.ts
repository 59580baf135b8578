// The local coordinator keeps each value as one flat string: every byte must come back,
// the deadline must hold to the millisecond, and a value is a copy on the way in and on the way out.
import { describe, expect, it } from 'vitest';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';

describe('local coordinator values', () => {
  let now = 1_760_000_000_000;
  const c = new LocalCoordinator(() => now);

  it('gives back every byte value, empty values and large ones', async () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await c.set('all', all, 60_000);
    expect(await c.get('all')).toEqual(all);
    await c.set('empty', Buffer.alloc(0), 60_000);
    expect(await c.get('empty')).toEqual(Buffer.alloc(0));
    const big = Buffer.alloc(100_000, 0xfe);
    await c.set('big', big, 60_000);
    expect(await c.get('big')).toEqual(big);
  });

  it('stores a copy and hands out a new Buffer on every read', async () => {
    const value = Buffer.from('record');
    await c.set('k', value, 60_000);
    value.fill(0); // the caller reuses its buffer
    const a = (await c.get('k'))!;
    expect(a.toString()).toBe('record');
    a.fill(0); // a reader scribbles on what it got
    expect((await c.get('k'))?.toString()).toBe('record');
    expect(await c.get('k')).not.toBe(await c.get('k'));
  });

  it('keeps a value until its deadline, to the millisecond', async () => {
    await c.set('ttl', Buffer.from('x'), 1_500);
    now += 1_499;
    expect((await c.get('ttl'))?.toString()).toBe('x');
    expect(await c.setIfAbsent('ttl', Buffer.from('y'), 1_000)).toBe(false);
    now += 1;
    expect(await c.get('ttl')).toBeNull();
    expect(await c.setIfAbsent('ttl', Buffer.from('y'), 1_000)).toBe(true);
    expect((await c.get('ttl'))?.toString()).toBe('y');
  });

  it('closes', async () => {
    await c.close();
  });
});
