// IP addresses as the domain compares them (blacklist entries, audit lines, client IPs).
import { isIP } from 'node:net';

/** IPv4-mapped IPv6 (how a dual-stack socket reports IPv4 peers) is the IPv4 address; lower-cased. */
export function normalizeIp(ip: string): string {
  const lower = ip.toLowerCase();
  if (lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4) return lower.slice(7);
  return lower;
}
