// Client IP: the socket address, or the right-most untrusted X-Forwarded-For hop when the socket
// peer is a trusted proxy (docs/protocol.md 1). node:net's BlockList does the CIDR matching.
import { BlockList, isIP } from 'node:net';
import { normalizeIp } from './ip-address.js';

/** Addresses whose trust is remembered at most (each entry is an address and a boolean). */
const MEMO_LIMIT = 10_000;

export type ClientIpResolver = (socketIp: string, forwardedFor: string | undefined) => string;

export function createClientIpResolver(trusted: readonly string[]): ClientIpResolver {
  if (trusted.length === 0) return (socketIp) => normalizeIp(socketIp);
  const list = new BlockList();
  for (const entry of trusted) {
    const [addr, bits] = entry.split('/');
    const family = isIP(addr ?? '') === 6 ? 'ipv6' : 'ipv4';
    if (!addr || isIP(addr) === 0) throw new Error(`TRUSTED_PROXIES: "${entry}" is not an address or CIDR`);
    if (bits === undefined) list.addAddress(addr, family);
    else list.addSubnet(addr, Number(bits), family);
  }
  // BlockList.check builds a SocketAddress per call; on the hot path (every request through a proxy
  // checks two addresses) a memo of the answers costs a Map lookup. Bounded: emptied when full.
  const memo = new Map<string, boolean>();
  const isTrusted = (ip: string) => {
    let trusted = memo.get(ip);
    if (trusted === undefined) {
      const v = isIP(ip);
      trusted = v !== 0 && list.check(ip, v === 6 ? 'ipv6' : 'ipv4');
      if (memo.size >= MEMO_LIMIT) memo.clear();
      memo.set(ip, trusted);
    }
    return trusted;
  };
  return (socketIp, forwardedFor) => {
    let ip = normalizeIp(socketIp);
    if (!forwardedFor || !isTrusted(ip)) return ip;
    // Walk from the nearest hop back; the first address not belonging to a trusted proxy is the client.
    const hops = forwardedFor
      .split(',')
      .map((h) => normalizeIp(h.trim()))
      .filter((h) => isIP(h) !== 0);
    for (let i = hops.length - 1; i >= 0; i--) {
      ip = hops[i]!;
      if (!isTrusted(ip)) break;
    }
    return ip;
  };
}
