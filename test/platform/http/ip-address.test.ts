// IP normalisation, pinned directly and fast (the mutation run executes it per mutant).
import { describe, expect, it } from 'vitest';
import { normalizeIp } from '../../../src/platform/http/ip-address.js';

describe('IP addresses', () => {
  it('an IPv4-mapped IPv6 address is the IPv4 address; everything lower-cased', () => {
    expect(normalizeIp('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(normalizeIp('::FFFF:203.0.113.9')).toBe('203.0.113.9');
    expect(normalizeIp('::ffff:not-an-ip')).toBe('::ffff:not-an-ip');
    expect(normalizeIp('::ffff:1:2')).toBe('::ffff:1:2');
    expect(normalizeIp('2001:DB8::1')).toBe('2001:db8::1');
    expect(normalizeIp('198.51.100.7')).toBe('198.51.100.7');
    expect(normalizeIp('1:2:3::1.2.3.4')).toBe('1:2:3::1.2.3.4'); // an embedded IPv4 that is not mapped
  });
});
