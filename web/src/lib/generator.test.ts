// docs/spec.md "Key generation" rules 1-2 as the form applies them.
import { describe, expect, it } from 'vitest';
import { alphabetFor, crowdedKeySpace, generatorProblems, keySpace, placeholderCount, weakMask } from './generator.js';

describe('character classes', () => {
  it('make the alphabet as the union of the chosen classes', () => {
    expect(alphabetFor({ upper: true, lower: false, digits: false })).toBe('ABCDEFGHIJKLMNOPQRSTUVWXYZ');
    expect(alphabetFor({ upper: false, lower: true, digits: true })).toBe('abcdefghijklmnopqrstuvwxyz0123456789');
    expect(alphabetFor({ upper: true, lower: true, digits: true })).toHaveLength(62);
  });
  it('need at least one', () => {
    expect(alphabetFor({ upper: false, lower: false, digits: false })).toBe('');
    expect(
      generatorProblems({ mask: 'XXXX', classes: { upper: false, lower: false, digits: false }, amount: 1 }),
    ).toEqual([{ field: 'alphabet', msg: 'Choose at least one character class.' }]);
  });
});

describe('masks', () => {
  it('count *, # and X as random characters', () => {
    expect(placeholderCount('KW-****-####-XXXX')).toBe(12);
    expect(placeholderCount('ABC-123')).toBe(0);
  });
  it('need a placeholder, and are weak under 8', () => {
    const classes = { upper: true, lower: false, digits: true };
    expect(generatorProblems({ mask: 'ABC', classes, amount: 1 })[0]?.field).toBe('mask');
    expect(weakMask('KW-XXXX')).toBe(true);
    expect(weakMask('XXXX-XXXX')).toBe(false);
  });
  it('limit the amount to 1-500', () => {
    const classes = { upper: true, lower: false, digits: true };
    expect(generatorProblems({ mask: 'XXXXXXXX', classes, amount: 0 })[0]?.field).toBe('amount');
    expect(generatorProblems({ mask: 'XXXXXXXX', classes, amount: 501 })[0]?.field).toBe('amount');
    expect(generatorProblems({ mask: 'XXXXXXXX', classes, amount: 500 })).toEqual([]);
  });
});

describe('key space', () => {
  it('counts what a mask can produce and asks about a batch that takes over 1 % of it', () => {
    expect(keySpace('AB-##', 36)).toBe(1296);
    expect(crowdedKeySpace('AB-##', 36, 500)).toEqual({ space: 1296, share: 500 / 1296 });
    expect(crowdedKeySpace('AB-##', 36, 12)).toBeNull(); // under 1 %
    expect(crowdedKeySpace('XXXXX-XXXXX-XXXXX-XXXXX-XXXXX', 36, 500)).toBeNull();
    expect(crowdedKeySpace('no placeholders', 36, 500)).toBeNull(); // refused elsewhere
  });
});
