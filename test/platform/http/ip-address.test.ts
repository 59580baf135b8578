// IP normalisation, pinned directly and fast (the mutation run executes it per mutant).
import { describe, expect, it } from 'vitest';
import { IpRangeSet, normalizeIp, normalizeIpOrRange } from '../../../src/platform/http/ip-address.js';

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

describe('blacklist ranges', () => {
  it('writes a range with its host bits cleared; a one-address range is the address; refuses the rest', () => {
    expect(normalizeIpOrRange('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(normalizeIpOrRange('10.1.2.3/32')).toBe('10.1.2.3');
    expect(normalizeIpOrRange('0.0.0.0/0')).toBe('0.0.0.0/0');
    expect(normalizeIpOrRange('2001:DB8:ffff::1/32')).toBe('2001:db8::/32');
    expect(normalizeIpOrRange('2001:db8::1/128')).toBe('2001:db8::1');
    expect(normalizeIpOrRange('1:0:0:2:0:0:0:3/128')).toBe('1:0:0:2::3');
    // A mapped address is read as IPv4, whose prefixes end at 32.
    expect(normalizeIpOrRange('::ffff:192.0.2.0/120')).toBeNull();
    expect(normalizeIpOrRange('::FFFF:203.0.113.9')).toBe('203.0.113.9');
    for (const bad of ['10.0.0.0/33', '2001:db8::/129', '10.0.0.0/', '10.0.0.0/x', 'nope/8', '10.0.0.0/-1', '1.2.3'])
      expect(normalizeIpOrRange(bad), bad).toBeNull();
  });

  it('matches every address inside a range, IPv4 and IPv6, and nothing outside', () => {
    const set = new IpRangeSet();
    for (const e of ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '198.51.100.128/25', 'fe80::/10'].map((v) =>
      normalizeIpOrRange(v)!,
    ))
      set.add(e);
    for (const inside of [
      '10.0.0.0',
      '10.255.255.255',
      '10.20.30.40',
      '::ffff:10.1.1.1',
      '192.0.2.7',
      '198.51.100.128',
      '198.51.100.255',
      '2001:db8::1',
      '2001:DB8:ffff:ffff:ffff:ffff:ffff:ffff',
      'fe80::1',
      'febf::1',
    ])
      expect(set.has(inside), inside).toBe(true);
    for (const outside of [
      '11.0.0.0',
      '9.255.255.255',
      '192.0.2.8',
      '198.51.100.127',
      '2001:db9::1',
      '2001:db7:ffff::1',
      'fec0::1',
      '::1',
      'not an ip',
    ])
      expect(set.has(outside), outside).toBe(false);
    const everything = new IpRangeSet();
    everything.add('0.0.0.0/0');
    expect(everything.has('203.0.113.1')).toBe(true);
    expect(everything.has('2001:db8::1')).toBe(false);
  });
});
