import { describe, expect, it } from 'vitest';
import {
  durationDays,
  durationMs,
  expandMask,
  keyPreview,
  normalizeAlphabet,
  placeholderCount,
  pricePerKey,
} from '../../../src/modules/keys/license-keys.js';

describe('mask expansion (docs/spec.md "Key generation" rule 1)', () => {
  it('replaces every *, # and X with an alphabet character and copies everything else', () => {
    for (let i = 0; i < 200; i++) {
      const key = expandMask('AB-*#X-z9.', 'Q7');
      expect(key).toMatch(/^AB-[Q7]{3}-z9\.$/);
    }
  });

  it('uses every character of the alphabet, roughly uniformly', () => {
    const counts = new Map<string, number>();
    const alphabet = 'ABCDEFGHIJ'; // 10 chars: 256 % 10 != 0, so a modulo bias would show
    for (let i = 0; i < 2000; i++)
      for (const ch of expandMask('**********', alphabet)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect([...counts.keys()].sort().join('')).toBe(alphabet);
    for (const n of counts.values()) expect(n).toBeGreaterThan(1700); // expected 2000 each
  });

  it('counts placeholders', () => {
    expect(placeholderCount('XX-**-##-ab')).toBe(6);
  });
});

describe('alphabet (rule 2)', () => {
  it('is the union of chosen characters, without duplicates', () => {
    expect(normalizeAlphabet('AABBa11')).toBe('ABa1');
  });
});

describe('durations (rule 3, docs/protocol.md 11.6)', () => {
  it.each([
    [1, 'hours', 1],
    [24, 'hours', 1],
    [25, 'hours', 2],
    [3, 'days', 3],
    [2, 'weeks', 14],
    [3, 'months', 90],
    [5, 'lifetime', 0],
  ] as const)('%i %s is %i days', (value, unit, days) => {
    expect(durationDays(value, unit)).toBe(days);
  });

  it('expiry lengths are exact for hours and 30-day months; lifetime has none', () => {
    expect(durationMs(5, 'hours')).toBe(5 * 3600_000);
    expect(durationMs(1, 'months')).toBe(30 * 86_400_000);
    expect(durationMs(1, 'lifetime')).toBeNull();
  });
});

describe('price per key (rule 4)', () => {
  it.each([
    ['exact tier wins', 7, { 'days:7': 3, 'days:30': 10 }, 3],
    ['lifetime tier for lifetime', 0, { lifetime: 50, 'days:30': 10 }, 50],
    ['pro rata from days:30, rounded up', 45, { 'days:30': 10 }, 15],
    ['pro rata is at least 1', 1, { 'days:30': 1 }, 1],
    ['pro rata for lifetime without a lifetime tier uses days 0 -> at least 1', 0, { 'days:30': 10 }, 1],
    ['days:30 of 0 falls back to 1', 45, { 'days:30': 0 }, 1],
    ['no tiers: 1', 90, {}, 1],
    ['a zero exact tier is free', 7, { 'days:7': 0 }, 0],
  ])('%s', (_name, days, costs, price) => {
    expect(pricePerKey(days, costs)).toBe(price);
  });
});

describe('key preview (docs/protocol.md 11.15)', () => {
  it('keeps the first and last four characters', () => {
    expect(keyPreview('AB3D-EFGH-9XYZ')).toBe('AB3D****9XYZ');
  });
});
