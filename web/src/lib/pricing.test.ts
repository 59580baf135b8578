// docs/spec.md "Key generation" rules 3-5 as the generator applies them before sending, and the proof that
// the page and the server price every batch the same (the server's own pricePerKey is the oracle).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { durationDays as serverDays, pricePerKey as serverPrice } from '../../../src/modules/keys/license-keys.js';
import { durationDays, KEY_COST_TIERS, pricePerKey, quote, type DurationUnit, type KeyCosts } from './pricing.js';

describe('rule 3: durations in days before the price lookup', () => {
  it('rounds hours up to whole days, at least one', () => {
    expect(durationDays(1, 'hours')).toBe(1);
    expect(durationDays(24, 'hours')).toBe(1);
    expect(durationDays(25, 'hours')).toBe(2);
  });
  it('counts weeks as 7 days, months as 30, lifetime as 0', () => {
    expect(durationDays(2, 'weeks')).toBe(14);
    expect(durationDays(3, 'months')).toBe(90);
    expect(durationDays(5, 'lifetime')).toBe(0);
  });
});

describe('rule 4: price per key', () => {
  const costs: KeyCosts = { 'days:7': 3, 'days:30': 10, lifetime: 80 };
  it('uses the exact tier when it exists', () => {
    expect(pricePerKey(7, costs)).toBe(3);
    expect(pricePerKey(30, costs)).toBe(10);
  });
  it('uses the lifetime tier for lifetime keys', () => {
    expect(pricePerKey(0, costs)).toBe(80);
  });
  it('prices other durations pro rata from days:30, rounded up, at least 1', () => {
    expect(pricePerKey(45, costs)).toBe(15); // ceil(45 / 30 * 10)
    expect(pricePerKey(1, costs)).toBe(1); // ceil(1 / 30 * 10) = 1
    expect(pricePerKey(2, { 'days:30': 100 })).toBe(7); // ceil(6.67)
    expect(pricePerKey(0, { 'days:30': 10 })).toBe(1); // lifetime without a lifetime tier: max(1, 0)
  });
  it('falls back to 1 credit without days:30 (or with days:30 at 0)', () => {
    expect(pricePerKey(90, {})).toBe(1);
    expect(pricePerKey(90, { 'days:30': 0 })).toBe(1);
    expect(pricePerKey(0, {})).toBe(1);
  });
  it('treats a cleared (null) tier as absent', () => {
    expect(pricePerKey(7, { 'days:7': null, 'days:30': 30 })).toBe(7);
  });
  it('keeps an exact tier of 0 (free keys)', () => {
    expect(pricePerKey(1, { 'days:1': 0, 'days:30': 30 })).toBe(0);
  });
});

describe('rule 5: the refusal before sending', () => {
  const base = { duration: 30, unit: 'days' as const, costs: { 'days:30': 10 } };
  it('refuses a total over the balance', () => {
    const q = quote({ ...base, amount: 3, balance: 25 });
    expect(q).toMatchObject({ perKey: 10, total: 30, refused: true });
  });
  it('accepts a total equal to the balance', () => {
    expect(quote({ ...base, amount: 3, balance: 30 }).refused).toBe(false);
  });
  it('never refuses an unlimited balance (null)', () => {
    expect(quote({ ...base, amount: 500, balance: null }).refused).toBe(false);
  });
  it('refuses anything but free keys at a zero balance', () => {
    expect(quote({ ...base, amount: 1, balance: 0 }).refused).toBe(true);
    expect(quote({ amount: 5, duration: 1, unit: 'days', costs: { 'days:1': 0 }, balance: 0 }).refused).toBe(false);
  });
});

describe('the page prices exactly like the server', () => {
  const tierCost = fc.option(fc.integer({ min: 0, max: 1000 }), { nil: undefined });
  const costsArb = fc.record(
    Object.fromEntries(KEY_COST_TIERS.map((t) => [t, tierCost])) as Record<string, typeof tierCost>,
  );
  const unitArb = fc.constantFrom<DurationUnit>('hours', 'days', 'weeks', 'months', 'lifetime');
  it('for any duration, unit and key_costs', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3650 }), unitArb, costsArb, (value, unit, raw) => {
        const costs = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined)) as Record<
          string,
          number
        >;
        const days = durationDays(value, unit);
        expect(days).toBe(serverDays(value, unit));
        expect(pricePerKey(days, costs)).toBe(serverPrice(days, costs));
      }),
      { numRuns: 2000 },
    );
  });
});
