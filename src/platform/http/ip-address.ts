// IP addresses as the domain compares them (blacklist entries, audit lines, client IPs).
import { isIP } from 'node:net';

/** IPv4-mapped IPv6 (how a dual-stack socket reports IPv4 peers) is the IPv4 address; lower-cased. */
export function normalizeIp(ip: string): string {
  const lower = ip.toLowerCase();
  if (lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4) return lower.slice(7);
  return lower;
}

/** An IPv4 address as a 32-bit number, or null. */
function v4Bits(ip: string): bigint | null {
  if (isIP(ip) !== 4) return null;
  let v = 0n;
  for (const part of ip.split('.')) v = (v << 8n) | BigInt(Number(part));
  return v;
}

/** An IPv6 address as a 128-bit number (an embedded IPv4 tail included), or null. */
function v6Bits(ip: string): bigint | null {
  if (isIP(ip) !== 6) return null;
  let s = ip.toLowerCase();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const lastColon = s.lastIndexOf(':');
  const tail = v4Bits(s.slice(lastColon + 1));
  if (tail !== null) s = `${s.slice(0, lastColon + 1)}${(tail >> 16n).toString(16)}:${(tail & 0xffffn).toString(16)}`;
  const [head = '', rest] = s.split('::');
  const h = head ? head.split(':') : [];
  const r = rest === undefined ? null : rest ? rest.split(':') : [];
  const groups = r === null ? h : [...h, ...Array<string>(8 - h.length - r.length).fill('0'), ...r];
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(parseInt(g, 16));
  return v;
}

interface Parsed {
  family: 4 | 6;
  bits: bigint;
}

function parse(ip: string): Parsed | null {
  const v4 = v4Bits(ip);
  if (v4 !== null) return { family: 4, bits: v4 };
  const v6 = v6Bits(ip);
  return v6 === null ? null : { family: 6, bits: v6 };
}

const WIDTH = { 4: 32, 6: 128 } as const;

function formatBits(family: 4 | 6, bits: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => ((bits >> s) & 255n).toString()).join('.');
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((bits >> BigInt(i * 16)) & 0xffffn).toString(16));
  // The shortest form: the longest run of zero groups (two or more) becomes '::'.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  if (best < 0) return groups.join(':');
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLen).join(':')}`;
}

/**
 * A blacklist `ip` value: an address, or a CIDR range (`10.0.0.0/8`, `2001:db8::/32`) written with its
 * host bits cleared; a range of one address is that address. Null when it is neither.
 */
export function normalizeIpOrRange(value: string): string | null {
  const slash = value.indexOf('/');
  if (slash < 0) return isIP(value) === 0 ? null : normalizeIp(value);
  const addr = parse(normalizeIp(value.slice(0, slash)));
  const lenText = value.slice(slash + 1);
  if (!addr || !/^\d{1,3}$/.test(lenText)) return null;
  const len = Number(lenText);
  const width = WIDTH[addr.family];
  if (len > width) return null;
  const host = BigInt(width - len);
  const network = (addr.bits >> host) << host;
  const text = formatBits(addr.family, network);
  return len === width ? text : `${text}/${len}`;
}

/**
 * Addresses and CIDR ranges, asked about one address at a time (the client hot path): exact
 * addresses are one set lookup; ranges are kept per prefix length as sets of network numbers, so a
 * lookup costs one set probe per distinct prefix length, however many ranges there are.
 */
export class IpRangeSet {
  private readonly exact = new Set<string>();
  private readonly ranges = { 4: new Map<number, Set<bigint>>(), 6: new Map<number, Set<bigint>>() };
  private count = 0;

  /** An address or a range as normalizeIpOrRange writes it; anything else is ignored. */
  add(entry: string): void {
    const slash = entry.indexOf('/');
    if (slash < 0) {
      this.exact.add(normalizeIp(entry));
      return;
    }
    const addr = parse(entry.slice(0, slash));
    const len = Number(entry.slice(slash + 1));
    if (!addr || !Number.isInteger(len) || len < 0 || len > WIDTH[addr.family]) return;
    const byLen = this.ranges[addr.family];
    let set = byLen.get(len);
    if (!set) byLen.set(len, (set = new Set()));
    set.add(addr.bits >> BigInt(WIDTH[addr.family] - len));
    this.count++;
  }

  has(ip: string): boolean {
    const n = normalizeIp(ip);
    if (this.exact.has(n)) return true;
    if (this.count === 0) return false;
    const addr = parse(n);
    if (!addr) return false;
    const width = WIDTH[addr.family];
    for (const [len, set] of this.ranges[addr.family]) if (set.has(addr.bits >> BigInt(width - len))) return true;
    return false;
  }
}
