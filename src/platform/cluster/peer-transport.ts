// Direct worker-to-worker connections for rpc.ts: each worker listens on a TCP socket (CLUSTER_HOST,
// CLUSTER_PORT) and advertises its address in the membership hash; a caller keeps one persistent
// connection per peer and pipelines length-prefixed msgpack frames over it (4-byte big-endian length,
// then the frame). Requests travel caller -> owner on the connection the caller opened, replies come
// back on the same connection; the frames themselves (ids, ops, errors) are rpc.ts's business.
//
// Trap: anything that can reach the port could otherwise run operations (an hb.start with a forged
// session), so a connection carries nothing until both ends proved they know the cluster secret
// (32 random bytes kept in the coordinator, created once with SET NX): the acceptor sends a fresh
// nonce with its worker id, the connector answers with its own nonce and an HMAC over both nonces
// and both ids, the acceptor answers with an HMAC of its own under another label (so the connector
// knows it reached the worker it meant, not a process that took over a dead worker's port). Before
// that, frames are capped at a few hundred bytes; a bad MAC, a malformed or oversized frame or a
// silent peer closes the connection.
//
// Liveness: a connection can stay ESTABLISHED while nothing crosses it (a partition between hosts,
// a peer that stopped reading). The connector sends a ping (an empty frame) every PING_EVERY_MS and
// the acceptor answers with an empty frame; a ping unanswered for `ackTimeoutMs` declares the link
// down: the socket is destroyed, the calls written on it are handed back (PeerHandlers.down, rpc.ts
// re-sends them through pub/sub) and calls go through pub/sub until a new connection, tried with
// exponential backoff, succeeds. An acceptor advertises pings in its hello (`ping: 1`), so a
// connector only pings a build that answers them.
import net from 'node:net';
import { KEYS, pack, unpack } from './names.js';
import type { Logger } from 'pino';
import { constantTimeEqual, hmacSha256, randomBytes } from '../crypto/index.js';
import type { Coordinator } from './coordinator.js';
import { versionOf } from './membership.js';

/** Largest frame an authenticated peer may send (an operation's arguments or result). */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** Largest frame before authentication (hello, auth, ok are well under 200 bytes). */
const HANDSHAKE_FRAME_BYTES = 512;
/** Connect plus handshake; past it the peer counts as unreachable and the call goes through pub/sub. */
export const HANDSHAKE_TIMEOUT_MS = 2_000;
/** After a failed connection, calls to that peer go through pub/sub this long before trying again (doubling). */
const RETRY_AFTER_FAILURE_MS = 1_000;
/** The longest backoff between attempts to reach a peer that keeps failing. */
const RETRY_MAX_MS = 30_000;
/** How often the connector pings a ready link. */
const PING_EVERY_MS = 1_000;
/** A ping unanswered this long (default of CLUSTER_PEER_TIMEOUT_MS) declares the link down. */
const PEER_ACK_TIMEOUT_MS = 3_000;
/** Connections still in their handshake; past it new ones are refused (callers fall back to pub/sub). */
const MAX_HANDSHAKES = 64;
const NONCE_BYTES = 32;
const SECRET_BYTES = 32;
const SECRET_KEY = KEYS.clusterSecret;
/** The secret is meant to live as long as the coordinator's data; a lost one is recreated (refreshSecret). */
const SECRET_TTL_MS = 10 * 365 * 24 * 3600 * 1000;
const PROTOCOL = 1;
/** A ping (connector to acceptor) and its pong: an empty frame. */
const EMPTY = Buffer.alloc(0);

export interface ListenOptions {
  /** Address to bind (CLUSTER_HOST). */
  host: string;
  /** Port to bind; 0 picks a free one (CLUSTER_PORT). */
  port: number;
  /** Host other workers connect to (CLUSTER_ADVERTISE_HOST); default: `host`. */
  advertiseHost?: string | undefined;
  /** A ping unanswered this long declares a link down (CLUSTER_PEER_TIMEOUT_MS); default PEER_ACK_TIMEOUT_MS. */
  ackTimeoutMs?: number | undefined;
}

export interface PeerHandlers {
  /** A request frame from an authenticated peer: its reply frame, or null when the frame is malformed. */
  request(frame: Buffer): Promise<Buffer> | null;
  /** A reply frame on a connection this worker opened; false when it is malformed. */
  reply(frame: Buffer): boolean;
  /** The link to `peer` went down: frames written on it may never arrive nor be answered. */
  down(peer: string): void;
}

/** What a transport counted since it started (metrics). */
interface LinkCounters {
  /** Links declared down (unanswered ping, or closed under us). */
  downs: number;
  /** Links that completed a handshake. */
  ups: number;
}

/** Splits a byte stream into length-prefixed frames; throws on a frame over `limit`. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(public limit: number) {}

  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const frames: Buffer[] = [];
    while (this.size >= 4) {
      if (this.chunks[0]!.length < 4) this.merge();
      const length = this.chunks[0]!.readUInt32BE(0);
      if (length > this.limit) throw new Error(`frame of ${length} bytes over the ${this.limit} byte cap`);
      if (this.size < 4 + length) break;
      // Merged only once a whole frame is here, so a large frame costs one copy, not one per chunk.
      this.merge();
      const buf = this.chunks[0]!;
      frames.push(buf.subarray(4, 4 + length));
      const rest = buf.subarray(4 + length);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.size = rest.length;
    }
    return frames;
  }

  private merge(): void {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.size)];
  }
}

/** Writes one frame. Frames written in one tick leave in one write (cork until the next tick). */
function writeFrame(socket: net.Socket, payload: Buffer): void {
  if (socket.destroyed) return;
  if (socket.writableCorked === 0) {
    socket.cork();
    process.nextTick(() => socket.uncork());
  }
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(payload.length, 0);
  socket.write(head);
  socket.write(payload);
}

/** `host:port`, with brackets around an IPv6 host. */
export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export function parseAddress(address: string): { host: string; port: number } | undefined {
  const sep = address.lastIndexOf(':');
  if (sep <= 0) return undefined;
  const host = address.slice(0, sep).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(sep + 1));
  if (!host || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { host, port };
}

function proof(
  secret: Buffer,
  role: 'connector' | 'acceptor',
  acceptorNonce: Buffer,
  connectorNonce: Buffer,
  connector: string,
  acceptor: string,
): Buffer {
  // Both nonces have a fixed length, so the concatenation is unambiguous.
  const label = Buffer.from(`kwpeer${PROTOCOL} ${role}\n`);
  return hmacSha256(
    secret,
    Buffer.concat([label, acceptorNonce, connectorNonce, Buffer.from(`${connector}\n${acceptor}`)]),
  );
}

function bytes(v: unknown, n: number): v is Buffer {
  return v instanceof Uint8Array && v.byteLength === n;
}

/** A handshake frame as a record, or undefined when it is not msgpack or not a map. */
function record(frame: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = unpack(frame);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

interface Link {
  address: string;
  /** The authenticated socket, or null when it could not be made. */
  ready: Promise<net.Socket | null>;
  /** Set once ready. */
  socket?: net.Socket | undefined;
  /** The acceptor answers pings. */
  pings?: boolean;
  /** When the unanswered ping was sent (performance.now()), if one is out. */
  pingSentAt?: number | undefined;
}

export class PeerTransport {
  private server: net.Server | undefined;
  private secret: Buffer | undefined;
  private readonly links = new Map<string, Link>();
  /** Peers that failed: calls go through pub/sub until `until`; `failures` sets the next backoff. */
  private readonly downUntil = new Map<string, { until: number; failures: number }>();
  private readonly sockets = new Set<net.Socket>();
  private handshakes = 0;
  private closed = false;
  private pinger: NodeJS.Timeout | undefined;
  /** Test hook (FAULT_PEER_FREEZE): accepted connections are not read, as if the host were cut off. */
  private frozen = false;
  readonly counters: LinkCounters = { downs: 0, ups: 0 };
  /** `host:port` other workers reach this one at, once listening. */
  address: string | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly id: string,
    private readonly log: Logger,
    private readonly opts: ListenOptions,
    private readonly handlers: PeerHandlers,
  ) {}

  /** Reads (or creates) the cluster secret and starts listening. */
  async start(): Promise<void> {
    await this.refreshSecret();
    const server = net.createServer((socket) => this.accept(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.log.error({ err }, 'cluster.peer_listener_failed'));
    const port = (server.address() as net.AddressInfo).port;
    this.address = formatAddress(this.opts.advertiseHost ?? this.opts.host, port);
    this.log.info({ address: this.address }, 'cluster.peer_listening');
    this.pinger = setInterval(() => this.pingAll(), PING_EVERY_MS);
    this.pinger.unref();
  }

  /** Links with an authenticated connection now. */
  get linksUp(): number {
    let n = 0;
    for (const l of this.links.values()) if (l.socket && !l.socket.destroyed) n++;
    return n;
  }

  /** Test hook: stop (true) or resume (false) reading every accepted connection. */
  freeze(on: boolean): void {
    this.frozen = on;
    for (const s of this.accepted) {
      if (on) s.pause();
      else s.resume();
    }
    this.log.warn({ frozen: on }, 'cluster.peer_freeze');
  }

  private readonly accepted = new Set<net.Socket>();

  private pingAll(): void {
    const now = performance.now();
    const timeout = this.opts.ackTimeoutMs ?? PEER_ACK_TIMEOUT_MS;
    for (const [peer, link] of this.links) {
      const socket = link.socket;
      if (!socket || !link.pings) continue;
      if (link.pingSentAt === undefined) {
        link.pingSentAt = now;
        writeFrame(socket, EMPTY);
      } else if (now - link.pingSentAt > timeout) {
        this.linkDown(peer, link, 'ack_timeout');
      }
    }
  }

  /**
   * Ends a link that stopped working and hands its calls back. After a silent link (unanswered ping)
   * the next attempt waits for the backoff; after a closed one it is made on the next call (a closed
   * connection is a clear answer: a refused reconnect starts the backoff).
   */
  private linkDown(peer: string, link: Link, reason: 'ack_timeout' | 'closed'): void {
    if (this.links.get(peer) !== link) return;
    this.links.delete(peer);
    this.counters.downs++;
    const retryInMs = reason === 'closed' ? 0 : this.backoff(peer);
    // A silent link is the incident; a closed one is also every peer's restart.
    const line = { peer, address: link.address, reason, retryInMs };
    if (reason === 'closed') this.log.info(line, 'cluster.peer_link_down');
    else this.log.warn(line, 'cluster.peer_link_down');
    link.socket?.destroy();
    this.handlers.down(peer);
  }

  /** Marks `peer` as failing: returns how long calls go through pub/sub before it is tried again. */
  private backoff(peer: string): number {
    const now = performance.now();
    if (this.downUntil.size > 1_000)
      for (const [p, d] of this.downUntil) if (d.until + RETRY_MAX_MS <= now) this.downUntil.delete(p);
    const failures = (this.downUntil.get(peer)?.failures ?? 0) + 1;
    const ms = Math.min(RETRY_MAX_MS, RETRY_AFTER_FAILURE_MS * 2 ** (failures - 1));
    this.downUntil.set(peer, { until: now + ms, failures });
    return ms;
  }

  /**
   * Adopts the secret the coordinator holds, creating it when absent (the first worker, or a Redis
   * that lost its data). Called every tick: workers that disagree for a moment fall back to pub/sub.
   */
  async refreshSecret(): Promise<void> {
    let s = await this.coordinator.get(SECRET_KEY);
    if (!s || s.length < SECRET_BYTES) {
      await this.coordinator.setIfAbsent(SECRET_KEY, randomBytes(SECRET_BYTES), SECRET_TTL_MS);
      s = await this.coordinator.get(SECRET_KEY);
    }
    if (s && s.length >= SECRET_BYTES) this.secret = s;
  }

  /**
   * Writes one frame to `peer` over an authenticated connection, opening one when there is none.
   * false: the frame was not written (no connection could be made, or it is over the cap), so the
   * caller may use another path. Once true, the frame is on its way and must never be sent again.
   */
  async send(peer: string, address: string, frame: Buffer): Promise<boolean> {
    if (this.closed || frame.length > MAX_FRAME_BYTES) return false;
    let link = this.links.get(peer);
    const down = this.downUntil.get(peer);
    if (!link || link.address !== address) {
      if (down && down.until > performance.now()) return false;
      link = { address, ready: this.connect(peer, address) };
      this.links.set(peer, link);
    }
    // A peer that failed before is retried in the background: calls do not wait on the attempt.
    if (down && !link.socket) return false;
    const socket = await link.ready;
    if (!socket || socket.destroyed) return false;
    writeFrame(socket, frame);
    return true;
  }

  /** Stops listening and ends every connection, both directions. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.pinger);
    const server = this.server;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.links.clear();
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 5_000);
    // A peer's reset or a refused write must not take the process down.
    socket.on('error', () => undefined);
    socket.once('close', () => this.sockets.delete(socket));
  }

  // ---- the acceptor: answers requests from authenticated peers -------------------------------

  private accept(socket: net.Socket): void {
    if (this.closed || this.handshakes >= MAX_HANDSHAKES) {
      socket.destroy();
      return;
    }
    this.track(socket);
    this.accepted.add(socket);
    socket.once('close', () => this.accepted.delete(socket));
    if (this.frozen) socket.pause();
    this.handshakes++;
    let handshaking = true;
    const handshakeOver = () => {
      if (handshaking) this.handshakes--;
      handshaking = false;
    };
    const reader = new FrameReader(HANDSHAKE_FRAME_BYTES);
    const nonce = randomBytes(NONCE_BYTES);
    let peer: string | undefined;
    const refuse = (reason: string) => {
      if (socket.destroyed) return;
      this.log.warn({ reason, remote: socket.remoteAddress, peer }, 'cluster.peer_refused');
      socket.destroy();
    };
    const timer = setTimeout(() => refuse('handshake_timeout'), HANDSHAKE_TIMEOUT_MS);
    timer.unref();
    socket.once('close', () => {
      clearTimeout(timer);
      handshakeOver();
    });
    // `cv`: the cluster version (membership.ts); builds before it read none, and ignore it.
    writeFrame(socket, pack({ t: 'hello', v: PROTOCOL, cv: versionOf(this.id), id: this.id, nonce, ping: 1 }));
    socket.on('data', (chunk: Buffer) => {
      let frames: Buffer[];
      try {
        frames = reader.push(chunk);
      } catch {
        return refuse('oversized_frame');
      }
      for (const frame of frames) {
        if (socket.destroyed) return;
        if (peer === undefined) {
          const auth = record(frame);
          const secret = this.secret;
          if (
            !auth ||
            auth.t !== 'auth' ||
            typeof auth.id !== 'string' ||
            auth.id.length === 0 ||
            auth.id.length > 64 ||
            !bytes(auth.nonce, NONCE_BYTES) ||
            !bytes(auth.mac, 32) ||
            !secret ||
            !constantTimeEqual(auth.mac, proof(secret, 'connector', nonce, auth.nonce, auth.id, this.id))
          )
            return refuse('bad_auth');
          peer = auth.id;
          clearTimeout(timer);
          handshakeOver();
          reader.limit = MAX_FRAME_BYTES;
          writeFrame(socket, pack({ t: 'ok', mac: proof(secret, 'acceptor', nonce, auth.nonce, auth.id, this.id) }));
          continue;
        }
        if (frame.length === 0) {
          writeFrame(socket, EMPTY); // a ping: the pong
          continue;
        }
        const reply = this.handlers.request(frame);
        if (!reply) return refuse('malformed_frame');
        void reply.then((r) => writeFrame(socket, r)).catch(() => undefined);
      }
    });
  }

  // ---- the connector: one persistent, authenticated connection per peer ----------------------

  private connect(peer: string, address: string): Promise<net.Socket | null> {
    const target = parseAddress(address);
    if (!target) return Promise.resolve(this.failed(peer, address, 'bad_address'));
    return new Promise((resolve) => {
      const socket = net.connect({ host: target.host, port: target.port });
      this.track(socket);
      const reader = new FrameReader(HANDSHAKE_FRAME_BYTES);
      const nonce = randomBytes(NONCE_BYTES);
      let state: 'hello' | 'ok' | 'ready' | 'failed' = 'hello';
      let expected: Buffer | undefined;
      const timer = setTimeout(() => fail('handshake_timeout'), HANDSHAKE_TIMEOUT_MS);
      timer.unref();
      const fail = (reason: string) => {
        if (state === 'ready' || state === 'failed') return;
        state = 'failed';
        clearTimeout(timer);
        socket.destroy();
        resolve(this.failed(peer, address, reason));
      };
      let pings = false;
      let version = 1;
      socket.once('close', () => {
        if (state !== 'ready') return fail('closed');
        // The calls written on it are handed back (rpc.ts re-sends them through pub/sub).
        const link = this.links.get(peer);
        if (link?.socket === socket) this.linkDown(peer, link, 'closed');
      });
      socket.on('data', (chunk: Buffer) => {
        let frames: Buffer[];
        try {
          frames = reader.push(chunk);
        } catch {
          socket.destroy();
          return fail('oversized_frame');
        }
        for (const frame of frames) {
          if (socket.destroyed) return;
          if (state === 'ready') {
            if (frame.length === 0) {
              const link = this.links.get(peer);
              if (link?.socket === socket) link.pingSentAt = undefined;
              this.downUntil.delete(peer);
              continue;
            }
            if (!this.handlers.reply(frame)) {
              this.log.warn({ peer }, 'cluster.peer_malformed_reply');
              socket.destroy();
              return;
            }
            continue;
          }
          const f = record(frame);
          const secret = this.secret;
          if (state === 'hello') {
            // The id check: a dead worker's port may have been reused by another process.
            if (!f || f.t !== 'hello' || f.v !== PROTOCOL || f.id !== peer || !bytes(f.nonce, NONCE_BYTES) || !secret)
              return fail('bad_hello');
            expected = proof(secret, 'acceptor', f.nonce, nonce, this.id, peer);
            pings = f.ping === 1;
            version = typeof f.cv === 'number' ? f.cv : 1;
            const mac = proof(secret, 'connector', f.nonce, nonce, this.id, peer);
            writeFrame(socket, pack({ t: 'auth', id: this.id, nonce, mac }));
            state = 'ok';
          } else if (state === 'ok') {
            if (!f || f.t !== 'ok' || !bytes(f.mac, 32) || !constantTimeEqual(f.mac, expected!)) return fail('bad_ok');
            state = 'ready';
            clearTimeout(timer);
            reader.limit = MAX_FRAME_BYTES;
            const link = this.links.get(peer);
            if (link?.address === address) {
              link.socket = socket;
              link.pings = pings;
            }
            // Without pings there is no proof the link works beyond this handshake.
            if (!pings) this.downUntil.delete(peer);
            this.counters.ups++;
            this.log.info({ peer, address, version }, 'cluster.peer_link_up');
            resolve(socket);
          }
        }
      });
    });
  }

  private failed(peer: string, address: string, reason: string): null {
    if (this.links.get(peer)?.address === address) this.links.delete(peer);
    const retryInMs = this.backoff(peer);
    if (!this.closed) this.log.warn({ peer, address, reason, retryInMs }, 'cluster.peer_unreachable');
    return null;
  }
}
