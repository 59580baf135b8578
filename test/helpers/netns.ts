// Hosts as Linux network namespaces for multi-host tests (root only): a bridge in this namespace at
// <subnet>.1 and one namespace per host at <subnet>.2, .3, ... joined to it by veth pairs. A partition
// between two hosts drops their packets to each other silently: each side's neighbour entry for the
// other is pinned to a MAC address nobody has, so frames leave and are discarded on arrival, and
// established connections stall (and new ones hang) as on a real network, while both hosts still
// reach the bridge address (where the test's PostgreSQL and Redis proxies, and nginx, live).
import { execFileSync, spawnSync } from 'node:child_process';
import net from 'node:net';

const IP = '/usr/sbin/ip';

function run(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Whether this process may make namespaces, bridges and veth pairs (root with CAP_NET_ADMIN). */
export function netnsAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = `kwprobe${process.pid % 10000}`;
  const ok = spawnSync(IP, ['netns', 'add', probe]).status === 0;
  if (ok) spawnSync(IP, ['netns', 'del', probe]);
  const veth =
    ok && spawnSync(IP, ['link', 'add', `${probe}v`, 'type', 'veth', 'peer', 'name', `${probe}w`]).status === 0;
  if (veth) spawnSync(IP, ['link', 'del', `${probe}v`]);
  return ok && veth;
}

export interface Host {
  ns: string;
  address: string;
  /** The host's end of its veth pair (inside its namespace). */
  dev: string;
}

export interface HostNetwork {
  /** This namespace's address on the bridge (what hosts reach the test's services at). */
  gateway: string;
  hosts: Host[];
  /** Drops every packet between two hosts, both ways, without closing anything. */
  partition(a: Host, b: Host): void;
  heal(a: Host, b: Host): void;
  close(): void;
}

export function createHostNetwork(count: number): HostNetwork {
  const n = 1 + (process.pid % 250);
  const subnet = `10.231.${n}`;
  const bridge = `kwbr${n}`;
  const hosts: Host[] = [];
  const made: (() => void)[] = [];
  const close = () => {
    for (const undo of made.reverse()) {
      try {
        undo();
      } catch {
        // already gone
      }
    }
  };
  // What an earlier run with the same numbers left behind (killed before its cleanup) goes first.
  for (let i = 0; i < count; i++) spawnSync(IP, ['netns', 'del', `kw${String.fromCharCode(97 + i)}${n}`]);
  for (let i = 0; i < count; i++) spawnSync(IP, ['link', 'del', `kw${String.fromCharCode(97 + i)}${n}`]);
  spawnSync(IP, ['link', 'del', bridge]);
  try {
    run(IP, ['link', 'add', bridge, 'type', 'bridge']);
    made.push(() => run(IP, ['link', 'del', bridge]));
    run(IP, ['addr', 'add', `${subnet}.1/24`, 'dev', bridge]);
    run(IP, ['link', 'set', bridge, 'up']);
    for (let i = 0; i < count; i++) {
      const name = `kw${String.fromCharCode(97 + i)}${n}`;
      const dev = `${name}h`;
      run(IP, ['netns', 'add', name]);
      made.push(() => run(IP, ['netns', 'del', name]));
      run(IP, ['link', 'add', name, 'type', 'veth', 'peer', 'name', dev]);
      made.push(() => run(IP, ['link', 'del', name]));
      run(IP, ['link', 'set', dev, 'netns', name]);
      run(IP, ['link', 'set', name, 'master', bridge, 'up']);
      const inNs = (...args: string[]) => run(IP, ['netns', 'exec', name, ...args]);
      inNs(IP, 'addr', 'add', `${subnet}.${i + 2}/24`, 'dev', dev);
      inNs(IP, 'link', 'set', dev, 'up');
      inNs(IP, 'link', 'set', 'lo', 'up');
      hosts.push({ ns: name, address: `${subnet}.${i + 2}`, dev });
    }
  } catch (err) {
    close();
    throw err;
  }
  const drop = (from: Host, to: Host, on: boolean) =>
    run(IP, [
      'netns',
      'exec',
      from.ns,
      IP,
      'neigh',
      ...(on ? ['replace', to.address, 'lladdr', '02:00:00:00:00:01', 'nud', 'permanent'] : ['del', to.address]),
      'dev',
      from.dev,
    ]);
  return {
    gateway: `${subnet}.1`,
    hosts,
    partition(a, b) {
      drop(a, b, true);
      drop(b, a, true);
    },
    heal(a, b) {
      drop(a, b, false);
      drop(b, a, false);
    },
    close,
  };
}

/**
 * Forwards TCP connections from `host` (any free port) to `target`; returns the port. `cut`, asked of
 * every chunk a client sends, ends that connection instead of forwarding the chunk (a fault in the
 * middle of a conversation, e.g. Redis gone just as a write arrives); with 'after-reply' the chunk is
 * forwarded and the connection ends when the answer comes back, unread (the write was applied, its
 * answer lost).
 */
export async function tcpForward(
  host: string,
  target: net.NetConnectOpts,
  cut?: (fromClient: Buffer) => boolean | 'after-reply',
): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.once('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    let dropReply = false;
    client.on('data', (chunk: Buffer) => {
      const how = cut?.(chunk) ?? false;
      if (how === true) {
        client.destroy();
        upstream.destroy();
        return;
      }
      if (how === 'after-reply') dropReply = true;
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once('drain', () => client.resume());
      }
    });
    client.once('end', () => upstream.end());
    upstream.on('data', (chunk: Buffer) => {
      if (dropReply) {
        client.destroy();
        upstream.destroy();
      } else if (!client.write(chunk)) {
        upstream.pause();
        client.once('drain', () => upstream.resume());
      }
    });
    upstream.once('end', () => client.end());
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
