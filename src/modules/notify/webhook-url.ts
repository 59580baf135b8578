// Webhook targets must be public https URLs (SPEC team rule 1, PROTOCOL 11.14): the host must
// resolve only to public addresses. ALLOW_PRIVATE_WEBHOOKS=1 (tests) also allows http and loopback.
import { BlockList, isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { validationError } from '../../errors.js';

const PRIVATE = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  PRIVATE.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['64:ff9b::', 96],
] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv6');
}

export function isPublicAddress(ip: string): boolean {
  const v = isIP(ip);
  if (v === 0) return false;
  if (v === 6 && ip.toLowerCase().startsWith('::ffff:')) return isPublicAddress(ip.slice(7));
  return !PRIVATE.check(ip, v === 6 ? 'ipv6' : 'ipv4');
}

export async function assertWebhookUrl(raw: string, allowPrivate: boolean, field = 'webhook'): Promise<URL> {
  const fail = () => validationError(field, 'Webhook must be a public https URL', 'url_not_public');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail();
  }
  if (url.username || url.password) throw fail();
  if (allowPrivate) {
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw fail();
    return url;
  }
  if (url.protocol !== 'https:') throw fail();
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    throw fail();
  }
  if (addresses.length === 0 || !addresses.every(isPublicAddress)) throw fail();
  return url;
}
