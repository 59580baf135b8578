import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { KeySlots } from '../../src/modules/realtime/key-slots.js';

const pair = () => ({ s2c: randomBytes(32), c2s: randomBytes(32) });

describe('KeySlots', () => {
  it('keeps each connection its own keys, across slab boundaries', () => {
    const slots = new KeySlots();
    const keys = Array.from({ length: 2_100 }, pair); // three slabs of 1,024
    const ids = keys.map((k) => slots.take(k));
    expect(new Set(ids).size).toBe(keys.length);
    expect(slots.size).toBe(keys.length);
    for (const i of [0, 1, 1_023, 1_024, 1_025, 2_047, 2_048, 2_099]) {
      expect(slots.s2c(ids[i]!).equals(keys[i]!.s2c)).toBe(true);
      expect(slots.c2s(ids[i]!).equals(keys[i]!.c2s)).toBe(true);
      expect(slots.s2c(ids[i]!).byteLength).toBe(32);
    }
  });

  it('zeroes a released slot and hands it out again', () => {
    const slots = new KeySlots();
    const a = pair();
    const b = pair();
    const first = slots.take(a);
    const other = slots.take(b);
    const view = slots.c2s(first);
    slots.release(first);
    expect(view.equals(Buffer.alloc(32))).toBe(true); // nothing of the old keys is left
    expect(slots.s2c(other).equals(b.s2c)).toBe(true);
    const c = pair();
    expect(slots.take(c)).toBe(first);
    expect(slots.c2s(first).equals(c.c2s)).toBe(true);
    expect(slots.size).toBe(2);
  });
});
