import { describe, expect, it } from 'vitest';
import { createClientIpResolver } from '../../../src/platform/http/client-ip.js';

describe('client IP (docs/protocol.md 1, TRUSTED_PROXIES)', () => {
  it('uses the socket address and ignores X-Forwarded-For without trusted proxies', () => {
    const resolve = createClientIpResolver([]);
    expect(resolve('::ffff:203.0.113.9', '1.2.3.4')).toBe('203.0.113.9');
  });

  it('believes X-Forwarded-For only from a trusted proxy, taking the nearest untrusted hop', () => {
    const resolve = createClientIpResolver(['10.0.0.0/8', '127.0.0.1']);
    expect(resolve('127.0.0.1', '198.51.100.7, 10.1.2.3')).toBe('198.51.100.7');
    expect(resolve('10.9.9.9', '6.6.6.6, 198.51.100.7')).toBe('198.51.100.7'); // 6.6.6.6 was written by the client
    expect(resolve('192.0.2.1', '198.51.100.7')).toBe('192.0.2.1');
    expect(resolve('127.0.0.1', 'garbage')).toBe('127.0.0.1');
  });

  it('keeps every answer right past the bound of remembered addresses (more than 10,000 distinct ones)', () => {
    const resolve = createClientIpResolver(['10.0.0.0/8']);
    for (let i = 0; i < 25_000; i++) {
      const client = `198.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      const proxy = `10.0.${(i >> 8) & 255}.${i & 255}`;
      expect(resolve(proxy, `${client}, ${proxy}`)).toBe(client);
      expect(resolve(client, '10.1.1.1')).toBe(client); // a client is never a trusted proxy
    }
  });

  it('rejects a malformed entry', () => {
    expect(() => createClientIpResolver(['not-an-ip'])).toThrow(/TRUSTED_PROXIES/);
  });
});
