// Webhook targets must be public https URLs (docs/spec.md "Dashboard: team" rule 1, docs/protocol.md 11.14): the host
// must resolve only to public addresses. ALLOW_PRIVATE_WEBHOOKS=1 (tests) also allows http and loopback.
import { BlockList, isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { validationError } from '../../errors.js';

/** IPv4 ranges that are not public, as [first address, prefix length]. */
const PRIVATE_V4: readonly (readonly [string, number])[] = [
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
];

/**
 * A dotted quad as an unsigned 32-bit number; -1 unless it is four decimal octets of 0-255 with no
 * leading zero: exactly the strings node's isIP calls IPv4.
 */
function ipv4Number(ip: string): number {
  let n = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || ++dots > 3) return -1;
      n = n * 256 + octet;
      octet = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57 && digits < 3 && !(digits > 0 && octet === 0)) {
      octet = octet * 10 + (c - 48);
      if (octet > 255) return -1;
      digits++;
    } else return -1;
  }
  return dots === 3 && digits > 0 ? n * 256 + octet : -1;
}

/** The ranges as [first, last] numbers: a client address is checked on every activation (geolocation). */
const PRIVATE_V4_SPANS = PRIVATE_V4.map(([net, bits]) => {
  const first = ipv4Number(net);
  return [first, first + 2 ** (32 - bits) - 1] as const;
});

const PRIVATE_V6 = new BlockList();
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['64:ff9b::', 96],
] as const) {
  PRIVATE_V6.addSubnet(net, bits, 'ipv6');
}

export function isPublicAddress(ip: string): boolean {
  const n = ipv4Number(ip);
  if (n >= 0) {
    for (const [first, last] of PRIVATE_V4_SPANS) if (n >= first && n <= last) return false;
    return true;
  }
  if (isIP(ip) !== 6) return false;
  if (ip.toLowerCase().startsWith('::ffff:')) return isPublicAddress(ip.slice(7));
  return !PRIVATE_V6.check(ip, 'ipv6');
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
