import { describe, expect, it } from 'vitest';
import { formatCount, plural } from './plural.js';

describe('counts in words', () => {
  it('use the singular for one and group digits', () => {
    expect(plural(1, 'credit')).toBe('1 credit');
    expect(plural(0, 'credit')).toBe('0 credits');
    expect(plural(2, 'day')).toBe('2 days');
    expect(plural(50_000, 'key')).toBe('50,000 keys');
    expect(plural(1, 'entry', 'entries')).toBe('1 entry');
    expect(plural(3, 'entry', 'entries')).toBe('3 entries');
    expect(formatCount(1296)).toBe('1,296');
  });
});
