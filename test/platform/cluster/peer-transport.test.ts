// The direct worker-to-worker transport (peer-transport.ts) in one process: real TCP on loopback,
// the in-process coordinator holding the cluster secret, and raw peers written here that speak (or
// abuse) the handshake byte for byte, so the protocol is pinned from outside: an acceptor and a
// connector each refuse a peer that does not prove it knows the secret, and prove it themselves.
// Fast on purpose (the mutation run executes it per mutant); the one 2 s wait is the handshake timeout.
import net from 'node:net';
import { createHmac, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { pack, unpack } from 'msgpackr';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import {
  FrameReader,
  HANDSHAKE_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  PeerTransport,
  parseAddress,
  type PeerHandlers,
} from '../../../src/platform/cluster/peer-transport.js';
import { Rpc } from '../../../src/platform/cluster/rpc.js';

const SECRET_KEY = 'cluster:secret';
const LOOPBACK = { host: '127.0.0.1', port: 0 };

type Line = Record<string, unknown> & { msg: string };

/** A logger whose lines the test reads (the refusal reasons are what an operator sees). */
function logger() {
  const lines: Line[] = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
  return { log, lines, reasons: (msg: string) => lines.filter((l) => l.msg === msg).map((l) => l.reason) };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Polls state of the transport under test (a background connection attempt has no event to await). */
async function until(cond: () => boolean): Promise<void> {
  // A liveness bound, not a speed one: a loaded CI machine may take seconds to run a reconnect.
  const end = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function framed(payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(payload.length);
  return Buffer.concat([head, payload]);
}

/** The handshake MAC, computed here from the documented layout (not with the module's own code). */
function proof(
  secret: Buffer,
  role: string,
  acceptorNonce: Buffer,
  connectorNonce: Buffer,
  connector: string,
  acceptor: string,
) {
  return createHmac('sha256', secret)
    .update(
      Buffer.concat([
        Buffer.from(`kwpeer1 ${role}\n`),
        acceptorNonce,
        connectorNonce,
        Buffer.from(`${connector}\n${acceptor}`),
      ]),
    )
    .digest();
}

/** A socket speaking frames: `next()` is the next decoded frame, `closed` settles when it ends. */
function framedSocket(socket: net.Socket) {
  const reader = new FrameReader(16 << 20);
  const frames: Buffer[] = [];
  let wake: (() => void) | undefined;
  socket.setNoDelay(true);
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    frames.push(...reader.push(chunk));
    wake?.();
  });
  let isClosed = false;
  const closed = new Promise<void>((r) =>
    socket.once('close', () => {
      isClosed = true;
      r();
      wake?.();
    }),
  );
  return {
    socket,
    frames,
    closed,
    get isClosed() {
      return isClosed;
    },
    async nextRaw(): Promise<Buffer> {
      while (frames.length === 0) {
        if (isClosed) throw new Error('closed before a frame');
        await new Promise<void>((r) => (wake = r));
      }
      return frames.shift()!;
    },
    async next(): Promise<Record<string, unknown>> {
      return unpack(await this.nextRaw()) as Record<string, unknown>;
    },
    send(payload: Buffer | Record<string, unknown>): void {
      socket.write(framed(Buffer.isBuffer(payload) ? payload : pack(payload)));
    },
  };
}

function rawClient(address: string) {
  const target = parseAddress(address)!;
  const socket = net.connect({ host: target.host, port: target.port });
  cleanups.push(() => void socket.destroy());
  return framedSocket(socket);
}

/** A TCP server played by the test: `onConnection` writes whatever it likes. */
async function fakeAcceptor(onConnection: (peer: ReturnType<typeof framedSocket>) => void) {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    onConnection(framedSocket(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, sockets };
}

const echoHandlers = (): PeerHandlers & { requests: Buffer[]; replies: Buffer[] } => {
  const requests: Buffer[] = [];
  const replies: Buffer[] = [];
  return {
    requests,
    replies,
    request: (frame) => {
      requests.push(frame);
      return frame.toString() === 'malformed' ? null : Promise.resolve(Buffer.concat([Buffer.from('re:'), frame]));
    },
    reply: (frame) => {
      replies.push(frame);
      return frame.toString() !== 're:bad-reply';
    },
    down: () => undefined,
  };
};

async function transport(
  coordinator: LocalCoordinator,
  id: string,
  handlers: PeerHandlers = echoHandlers(),
  log = logger().log,
) {
  const t = new PeerTransport(coordinator, id, log, LOOPBACK, handlers);
  await t.start();
  cleanups.push(() => t.close());
  return t;
}

function localCoordinator() {
  const c = new LocalCoordinator();
  cleanups.push(() => c.close());
  return c;
}

/** Answers a real acceptor's hello as `id` with `secret` and checks the acceptor's own proof. */
async function authOn(
  peer: ReturnType<typeof framedSocket>,
  hello: Record<string, unknown>,
  acceptorId: string,
  id: string,
  secret: Buffer,
) {
  expect(hello).toMatchObject({ t: 'hello', v: 1, id: acceptorId });
  const acceptorNonce = Buffer.from(hello.nonce as Uint8Array);
  expect(acceptorNonce).toHaveLength(32);
  const nonce = randomBytes(32);
  peer.send({ t: 'auth', id, nonce, mac: proof(secret, 'connector', acceptorNonce, nonce, id, acceptorId) });
  const ok = await peer.next();
  expect(ok.t).toBe('ok');
  expect(Buffer.from(ok.mac as Uint8Array)).toEqual(proof(secret, 'acceptor', acceptorNonce, nonce, id, acceptorId));
  return peer;
}

/** Connects to a real acceptor as `id` and completes the handshake with `secret`. */
async function authenticate(address: string, acceptorId: string, id: string, secret: Buffer) {
  const peer = rawClient(address);
  return authOn(peer, await peer.next(), acceptorId, id, secret);
}

describe('the cluster secret', () => {
  it('is created once (32 random bytes) and adopted by every later worker', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const secret = await c.get(SECRET_KEY);
    expect(secret).toHaveLength(32);
    await transport(c, 'b');
    expect(await c.get(SECRET_KEY)).toEqual(secret);
    expect(a.address).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('a secret shorter than 32 bytes is not used: no connection is authenticated with it', async () => {
    const c = localCoordinator();
    await c.set(SECRET_KEY, Buffer.alloc(16, 1), 60_000);
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const b = await transport(c, 'b');
    expect(await c.get(SECRET_KEY)).toHaveLength(16);
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(false);
    expect(reasons('cluster.peer_unreachable')).toEqual(['bad_hello']);
    // And as an acceptor: even a peer that knows those 16 bytes is refused.
    const peer = rawClient(a.address!);
    const hello = await peer.next();
    const nonce = randomBytes(32);
    const secret = Buffer.alloc(16, 1);
    peer.send({ t: 'auth', id: 'p', nonce, mac: proof(secret, 'connector', hello.nonce as Buffer, nonce, 'p', 'a') });
    await peer.closed;
    expect(peer.frames).toEqual([]);
  });
});

describe('the acceptor', () => {
  it('greets with its id and a fresh nonce, proves itself, then serves requests on the connection', async () => {
    const c = localCoordinator();
    const handlers = echoHandlers();
    const a = await transport(c, 'acceptor-a', handlers);
    const secret = (await c.get(SECRET_KEY))!;
    const peer = await authenticate(a.address!, 'acceptor-a', 'caller-1', secret);
    peer.send(Buffer.from('ping'));
    // A frame far over the handshake cap is fine once authenticated.
    const big = Buffer.alloc(100_000, 3);
    peer.send(big);
    expect((await peer.nextRaw()).toString()).toBe('re:ping');
    expect(await peer.nextRaw()).toEqual(Buffer.concat([Buffer.from('re:'), big]));
    expect(handlers.requests.map((r) => r.length)).toEqual([4, 100_000]);
    // Another connection gets another nonce.
    const other = rawClient(a.address!);
    const h1 = (await other.next()).nonce as Buffer;
    const again = rawClient(a.address!);
    expect((await again.next()).nonce).not.toEqual(h1);
  });

  it('accepts an id of 64 characters', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const peer = await authenticate(a.address!, 'a', 'x'.repeat(64), (await c.get(SECRET_KEY))!);
    peer.send(Buffer.from('hi'));
    expect((await peer.nextRaw()).toString()).toBe('re:hi');
  });

  it('refuses every auth frame that does not prove the secret, and serves nothing on it', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const handlers = echoHandlers();
    const a = await transport(c, 'a', handlers, log);
    const secret = (await c.get(SECRET_KEY))!;
    const attempts: ((acceptorNonce: Buffer) => Record<string, unknown> | Buffer)[] = [
      (_n) => ({ t: 'req', id: 1, from: 'x', op: 'echo', args: {} }),
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'authx', id: 'p', nonce, mac: proof(secret, 'connector', n, nonce, 'p', 'a') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: '', nonce, mac: proof(secret, 'connector', n, nonce, '', 'a') };
      },
      (n) => {
        const id = 'x'.repeat(65);
        const nonce = randomBytes(32);
        return { t: 'auth', id, nonce, mac: proof(secret, 'connector', n, nonce, id, 'a') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 7, nonce, mac: proof(secret, 'connector', n, nonce, '7', 'a') };
      },
      (n) => {
        const nonce = randomBytes(31);
        return { t: 'auth', id: 'p', nonce, mac: proof(secret, 'connector', n, nonce, 'p', 'a') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 'p', nonce, mac: proof(secret, 'connector', n, nonce, 'p', 'a').subarray(0, 31) };
      },
      // The right MAC under the acceptor's label, or with the ids swapped, or for another acceptor.
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 'p', nonce, mac: proof(secret, 'acceptor', n, nonce, 'p', 'a') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 'p', nonce, mac: proof(secret, 'connector', n, nonce, 'a', 'p') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 'p', nonce, mac: proof(secret, 'connector', nonce, n, 'p', 'a') };
      },
      (n) => {
        const nonce = randomBytes(32);
        return { t: 'auth', id: 'p', nonce, mac: proof(randomBytes(32), 'connector', n, nonce, 'p', 'a') };
      },
      () => pack(['auth']),
      () => pack(null),
      () => randomBytes(64), // not msgpack
    ];
    for (const attempt of attempts) {
      const peer = rawClient(a.address!);
      const hello = await peer.next();
      peer.send(attempt(hello.nonce as Buffer));
      await peer.closed;
      expect(peer.frames).toEqual([]); // no `ok`, no reply
    }
    expect(reasons('cluster.peer_refused')).toEqual(attempts.map(() => 'bad_auth'));
    expect(handlers.requests).toEqual([]);
    // Still serving the honest.
    const honest = await authenticate(a.address!, 'a', 'p', secret);
    honest.send(Buffer.from('after'));
    expect((await honest.nextRaw()).toString()).toBe('re:after');
  });

  it('reads at most 512 bytes per frame before authentication', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    // 512 bytes is read (and refused as a bad auth); 513 is refused on its length alone.
    const at = rawClient(a.address!);
    await at.next();
    at.send(Buffer.alloc(512));
    await at.closed;
    const over = rawClient(a.address!);
    await over.next();
    const head = Buffer.alloc(4);
    head.writeUInt32BE(513);
    over.socket.write(head);
    await over.closed;
    expect(reasons('cluster.peer_refused')).toEqual(['bad_auth', 'oversized_frame']);
  });

  it('closes a connection whose request is malformed, and keeps the others', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const secret = (await c.get(SECRET_KEY))!;
    const bad = await authenticate(a.address!, 'a', 'p1', secret);
    const good = await authenticate(a.address!, 'a', 'p2', secret);
    bad.send(Buffer.from('malformed'));
    await bad.closed;
    expect(reasons('cluster.peer_refused')).toEqual(['malformed_frame']);
    expect(bad.frames).toEqual([]);
    good.send(Buffer.from('still'));
    expect((await good.nextRaw()).toString()).toBe('re:still');
  });

  it('holds at most 64 connections in their handshake; past it new ones are closed at once', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const secret = (await c.get(SECRET_KEY))!;
    const waiting = Array.from({ length: 64 }, () => rawClient(a.address!));
    const hellos = await Promise.all(waiting.map((w) => w.next()));
    const refused = rawClient(a.address!);
    await refused.closed;
    expect(refused.frames).toEqual([]);
    // An authenticated connection frees its place at once...
    await authOn(waiting[0]!, hellos[0]!, 'a', 'first', secret);
    const second = rawClient(a.address!);
    expect((await second.next()).t).toBe('hello');
    const third = rawClient(a.address!);
    await third.closed;
    expect(third.frames).toEqual([]);
    // ...and one that gives up, once the acceptor sees it close (tried until then).
    waiting[1]!.socket.destroy();
    let replaced = false;
    for (let i = 0; i < 200 && !replaced; i++) {
      const p = rawClient(a.address!);
      replaced = await p.next().then(
        () => true,
        () => false,
      );
    }
    expect(replaced).toBe(true);
    const fourth = rawClient(a.address!);
    await fourth.closed;
    expect(fourth.frames).toEqual([]);
  });

  it('after close, accepts nothing and has ended its connections', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const peer = await authenticate(a.address!, 'a', 'p', (await c.get(SECRET_KEY))!);
    await a.close();
    await peer.closed;
    expect(await a.send('b', '127.0.0.1:1', Buffer.from('x'))).toBe(false);
  });
});

/**
 * The acceptor's half of the handshake, played by the test on `peer` as worker `id`; `tamper` changes
 * the hello or the ok it sends. Resolves with whether the connector's auth frame was right.
 */
async function acceptAs(
  peer: ReturnType<typeof framedSocket>,
  secret: Buffer,
  id: string,
  tamper: {
    hello?: (h: Record<string, unknown>) => unknown;
    ok?: (o: Record<string, unknown>, mac: (role: string) => Buffer) => unknown;
  } = {},
): Promise<boolean> {
  const nonce = randomBytes(32);
  const hello = { t: 'hello', v: 1, id, nonce };
  const h = tamper.hello ? tamper.hello(hello) : hello;
  peer.send(Buffer.isBuffer(h) ? h : pack(h));
  const auth = await peer.next().catch(() => undefined);
  if (!auth) return false;
  const connectorNonce = Buffer.from(auth.nonce as Uint8Array);
  const mac = (role: string) => proof(secret, role, nonce, connectorNonce, auth.id as string, id);
  const authValid =
    auth.t === 'auth' && Object.keys(auth).length === 4 && Buffer.from(auth.mac as Uint8Array).equals(mac('connector'));
  const ok = { t: 'ok', mac: mac('acceptor') };
  const o = tamper.ok ? tamper.ok(ok, mac) : ok;
  peer.send(Buffer.isBuffer(o) ? o : pack(o));
  return authValid;
}

describe('the connector', () => {
  it('authenticates, proves the secret the documented way, and reuses one connection for every frame', async () => {
    const c = localCoordinator();
    const { log, lines } = logger();
    const handlers = echoHandlers();
    const a = await transport(c, 'a', handlers, log);
    const secret = (await c.get(SECRET_KEY))!;
    const got: Buffer[] = [];
    const auths: Promise<boolean>[] = [];
    const fake = await fakeAcceptor((peer) => {
      auths.push(
        acceptAs(peer, secret, 'b').then((ok) => {
          peer.socket.on('data', () => {
            while (peer.frames.length > 0) {
              const f = peer.frames.shift()!;
              got.push(f);
              peer.send(Buffer.concat([Buffer.from('re:'), f]));
            }
          });
          return ok;
        }),
      );
    });
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => a.send('b', fake.address, Buffer.from(`f${i}`))),
    );
    expect(sent).toEqual(sent.map(() => true));
    expect(await a.send('b', fake.address, Buffer.alloc(2_000, 1))).toBe(true);
    expect(fake.sockets).toHaveLength(1);
    expect(await Promise.all(auths)).toEqual([true]);
    while (handlers.replies.length < 21) await new Promise<void>((r) => setImmediate(r));
    expect(got.slice(0, 20).map(String)).toEqual(Array.from({ length: 20 }, (_, i) => `f${i}`));
    expect(handlers.replies.at(-1)).toHaveLength(2_003); // over the handshake cap: fine once ready
    expect(lines.filter((l) => l.msg === 'cluster.peer_unreachable')).toEqual([]);
  });

  it('refuses an acceptor that is not the worker it meant, or does not speak this protocol', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const secret = (await c.get(SECRET_KEY))!;
    const hellos: ((h: Record<string, unknown>) => unknown)[] = [
      (h) => ({ ...h, id: 'someone-else' }), // a process that took over a dead worker's port
      (h) => ({ ...h, v: 2 }),
      (h) => ({ ...h, t: 'ok' }),
      (h) => ({ ...h, nonce: randomBytes(31) }),
      (h) => ({ ...h, nonce: 'x'.repeat(32) }),
      () => pack([1, 2]),
      () => randomBytes(40),
    ];
    for (const [i, hello] of hellos.entries()) {
      const auth: Promise<boolean>[] = [];
      const fake = await fakeAcceptor((peer) => void auth.push(acceptAs(peer, secret, `b${i}`, { hello })));
      expect(await a.send(`b${i}`, fake.address, Buffer.from('x'))).toBe(false);
      expect(await Promise.all(auth)).toEqual([false]); // no auth frame was sent to it
    }
    expect(reasons('cluster.peer_unreachable')).toEqual(hellos.map(() => 'bad_hello'));
  });

  it('refuses an acceptor that does not prove the secret', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const handlers = echoHandlers();
    const a = await transport(c, 'a', handlers, log);
    const secret = (await c.get(SECRET_KEY))!;
    const oks: ((o: Record<string, unknown>, mac: (role: string) => Buffer) => unknown)[] = [
      (o, mac) => ({ ...o, mac: mac('connector') }), // its own proof sent back
      (o) => ({ ...o, mac: randomBytes(32) }),
      (o) => ({ ...o, mac: (o.mac as Buffer).subarray(0, 31) }),
      (o) => ({ ...o, t: 'hello' }),
      () => pack('ok'),
    ];
    for (const [i, ok] of oks.entries()) {
      const fake = await fakeAcceptor((peer) => void acceptAs(peer, secret, `b${i}`, { ok }));
      expect(await a.send(`b${i}`, fake.address, Buffer.from('x'))).toBe(false);
    }
    expect(reasons('cluster.peer_unreachable')).toEqual(oks.map(() => 'bad_ok'));
    expect(handlers.replies).toEqual([]);
  });

  it('reads at most 512 bytes per frame before the acceptor proved itself', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const fake = await fakeAcceptor((peer) => {
      const head = Buffer.alloc(4);
      head.writeUInt32BE(513);
      peer.socket.write(head);
    });
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(false);
    expect(reasons('cluster.peer_unreachable')).toEqual(['oversized_frame']);
  });

  it('an address it cannot parse or reach is no connection; nothing over 8 MiB is sent', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const b = await transport(c, 'b');
    expect(await a.send('x', 'no-port', Buffer.from('x'))).toBe(false);
    const closedPort = await fakeAcceptor(() => undefined);
    const port = closedPort.address;
    await cleanups.pop()!(); // close that server: its port now refuses
    expect(await a.send('y', port, Buffer.from('x'))).toBe(false);
    expect(reasons('cluster.peer_unreachable')).toEqual(['bad_address', 'closed']);
    expect(MAX_FRAME_BYTES).toBe(8 * 1024 * 1024);
    expect(await a.send('b', b.address!, Buffer.alloc(MAX_FRAME_BYTES + 1))).toBe(false);
    expect(await a.send('b', b.address!, Buffer.alloc(MAX_FRAME_BYTES))).toBe(true);
  });

  it('reconnects after the connection ends, and when the peer moves to another address', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const s = (await c.get(SECRET_KEY))!;
    const first = await fakeAcceptor((peer) => void acceptAs(peer, s, 'b'));
    expect(await a.send('b', first.address, Buffer.from('1'))).toBe(true);
    const ended = framedSocket(first.sockets[0]!).closed;
    first.sockets[0]!.destroy();
    await ended;
    // The connector's side sees the close within a turn or two; until then a send may still use it.
    let reconnected = false;
    for (let i = 0; i < 200 && !reconnected; i++) {
      await a.send('b', first.address, Buffer.from('2'));
      reconnected = first.sockets.length === 2;
      if (!reconnected) await new Promise<void>((r) => setImmediate(r));
    }
    expect(reconnected).toBe(true);
    const moved = await fakeAcceptor((peer) => void acceptAs(peer, s, 'b'));
    expect(await a.send('b', moved.address, Buffer.from('3'))).toBe(true);
    expect(moved.sockets).toHaveLength(1);
    expect(first.sockets).toHaveLength(2);
  });

  it('drops a connection whose reply is malformed', async () => {
    const c = localCoordinator();
    const { log, lines } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const secret = (await c.get(SECRET_KEY))!;
    let closed: Promise<void> | undefined;
    const fake = await fakeAcceptor((peer) => {
      closed = peer.closed;
      void acceptAs(peer, secret, 'b').then(() =>
        peer.socket.on('data', () => {
          if (peer.frames.length > 0) peer.send(Buffer.from('re:bad-reply'));
        }),
      );
    });
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(true);
    await closed;
    expect(lines.filter((l) => l.msg === 'cluster.peer_malformed_reply')).toHaveLength(1);
  });
});

// The slow ones last: a run stops at its first failure, so fast tests get the first chance.
describe('the retry window after a failed connection', () => {
  it('after a failure, sends nothing to that peer for a second, then tries again', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const secret = (await c.get(SECRET_KEY))!;
    let honest = false;
    const fake = await fakeAcceptor((peer) => void acceptAs(peer, secret, honest ? 'b' : 'not-b'));
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(false);
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(false);
    expect(fake.sockets).toHaveLength(1);
    // Another peer is not held back by b's failure.
    const other = await transport(c, 'c');
    expect(await a.send('c', other.address!, Buffer.from('x'))).toBe(true);
    honest = true;
    await new Promise((r) => setTimeout(r, 1_050)); // the retry window is the behaviour under test
    // After a failure the next attempt runs in the background: this call takes pub/sub, a later one the link.
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(false);
    await until(() => a.linksUp === 2); // c's and b's
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(true);
    expect(fake.sockets).toHaveLength(2);
    expect(reasons('cluster.peer_unreachable')).toEqual(['bad_hello']);
  });

  it('a lost secret is recreated on the next refresh, and workers that refreshed talk again', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const b = await transport(c, 'b');
    const first = await c.get(SECRET_KEY);
    await c.del(SECRET_KEY);
    await a.refreshSecret();
    const second = await c.get(SECRET_KEY);
    expect(second).toHaveLength(32);
    expect(second).not.toEqual(first);
    // b still holds the old secret: a's connection is refused, so the call would go through pub/sub.
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(false);
    await b.refreshSecret();
    await new Promise((r) => setTimeout(r, 1_050)); // a's retry window after the failure (1 s)
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(false); // starts the new attempt
    await until(() => a.linksUp === 1);
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(true);
  });
});

describe('a silent peer', () => {
  it('is given up after the handshake timeout, on both sides', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const silentAcceptor = await fakeAcceptor(() => undefined);
    const t0 = performance.now();
    const silentClient = rawClient(a.address!);
    const [sent] = await Promise.all([a.send('b', silentAcceptor.address, Buffer.from('x')), silentClient.closed]);
    const took = performance.now() - t0;
    expect(sent).toBe(false);
    expect(took).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 1_000);
    expect(reasons('cluster.peer_unreachable')).toEqual(['handshake_timeout']);
    expect(reasons('cluster.peer_refused')).toEqual(['handshake_timeout']);
  });
});

// Added after the first mutation run (docs/testing.md "Mutation testing"): each pins a behaviour a surviving
// mutant showed no test held.
describe('listening and closing', () => {
  it('start() fails when the port is taken', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const port = parseAddress(a.address!)!.port;
    const b = new PeerTransport(c, 'b', logger().log, { host: '127.0.0.1', port }, echoHandlers());
    cleanups.push(() => b.close());
    await expect(b.start()).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  it('a closed transport sends nothing even to a live peer, its port refuses, and it logs no failures', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const b = await transport(c, 'b');
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(true);
    const silent = await fakeAcceptor(() => undefined);
    const pending = a.send('s', silent.address, Buffer.from('x'));
    while (silent.sockets.length === 0) await new Promise<void>((r) => setImmediate(r));
    await a.close();
    expect(await pending).toBe(false);
    expect(await a.send('b', b.address!, Buffer.from('x'))).toBe(false);
    expect(reasons('cluster.peer_unreachable')).toEqual([]);
    const refused = await new Promise<string>((resolve) => {
      const s = net.connect(parseAddress(a.address!)!);
      s.once('connect', () => {
        s.destroy();
        resolve('connected');
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
    // Closing one that never started is fine too.
    await new PeerTransport(c, 'never', logger().log, LOOPBACK, echoHandlers()).close();
  });
});

describe('handshake places and failures, more closely', () => {
  it('an authenticated connection that closes later frees no second place', async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const secret = (await c.get(SECRET_KEY))!;
    const waiting = Array.from({ length: 64 }, () => rawClient(a.address!));
    const hellos = await Promise.all(waiting.map((w) => w.next()));
    await authOn(waiting[0]!, hellos[0]!, 'a', 'first', secret); // 63 in their handshake
    const filler = rawClient(a.address!);
    expect((await filler.next()).t).toBe('hello'); // 64: full
    waiting[0]!.socket.destroy(); // authenticated: its end must not free a place
    waiting[2]!.socket.destroy(); // in its handshake: frees one
    const accepted = async () => {
      const p = rawClient(a.address!);
      return p.next().then(
        () => true,
        () => false,
      );
    };
    let replaced = false;
    for (let i = 0; i < 200 && !replaced; i++) replaced = await accepted();
    expect(replaced).toBe(true);
    expect(await accepted()).toBe(false);
  });

  it('a failed handshake is reported once, also after its socket closed', async () => {
    const c = localCoordinator();
    const { log, reasons } = logger();
    const a = await transport(c, 'a', echoHandlers(), log);
    const secret = (await c.get(SECRET_KEY))!;
    let closed: Promise<void> | undefined;
    const fake = await fakeAcceptor((peer) => {
      closed = peer.closed;
      void acceptAs(peer, secret, 'not-b');
    });
    expect(await a.send('b', fake.address, Buffer.from('x'))).toBe(false);
    await closed;
    for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
    expect(reasons('cluster.peer_unreachable')).toEqual(['bad_hello']);
  });

  it("the end of a connection to a peer's old address keeps the link to its new one", async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const secret = (await c.get(SECRET_KEY))!;
    const old = await fakeAcceptor((peer) => void acceptAs(peer, secret, 'b'));
    const moved = await fakeAcceptor((peer) => void acceptAs(peer, secret, 'b'));
    expect(await a.send('b', old.address, Buffer.from('1'))).toBe(true);
    expect(await a.send('b', moved.address, Buffer.from('2'))).toBe(true);
    const ended = framedSocket(old.sockets[0]!).closed;
    old.sockets[0]!.destroy();
    await ended;
    for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
    expect(await a.send('b', moved.address, Buffer.from('3'))).toBe(true);
    expect(moved.sockets).toHaveLength(1);
  });

  it("a failed connection to a peer's old address keeps the link to its new one", async () => {
    const c = localCoordinator();
    const a = await transport(c, 'a');
    const secret = (await c.get(SECRET_KEY))!;
    let failOld!: () => void;
    const old = await fakeAcceptor((peer) => {
      failOld = () => peer.send({ t: 'hello', v: 1, id: 'not-b', nonce: randomBytes(32) });
    });
    const moved = await fakeAcceptor((peer) => void acceptAs(peer, secret, 'b'));
    const first = a.send('b', old.address, Buffer.from('1')); // waits for a hello
    while (old.sockets.length === 0) await new Promise<void>((r) => setImmediate(r));
    expect(await a.send('b', moved.address, Buffer.from('2'))).toBe(true);
    failOld();
    expect(await first).toBe(false);
    expect(await a.send('b', moved.address, Buffer.from('3'))).toBe(true);
    expect(moved.sockets).toHaveLength(1);
  });
});

describe('rpc frames on the direct connection', () => {
  it('a frame that is not a request closes the connection; a request is answered under its id', async () => {
    const c = localCoordinator();
    const b = new Rpc(c, 'b', logger().log, { listen: LOOPBACK, addressOf: () => undefined });
    cleanups.push(() => b.close());
    b.handle('echo', async (args) => ({ echoed: args }));
    await b.start();
    const secret = (await c.get(SECRET_KEY))!;
    const good = await authenticate(b.address!, 'b', 'a', secret);
    good.send({ t: 'req', id: 41, from: 'a', op: 'echo', args: 'hi' });
    expect(await good.next()).toEqual({ t: 'res', id: 41, ok: true, value: { echoed: 'hi' } });
    const bad = await authenticate(b.address!, 'b', 'a2', secret);
    bad.send({ t: 'res', id: 1, ok: true, value: 1 });
    await bad.closed;
    expect(bad.frames).toEqual([]);
  });

  it('a request sent back as a reply settles nothing and ends the connection', async () => {
    const c = localCoordinator();
    const a = new Rpc(c, 'a', logger().log, { listen: LOOPBACK, addressOf: () => fake.address });
    cleanups.push(() => a.close());
    await a.start();
    const secret = (await c.get(SECRET_KEY))!;
    let closed: Promise<void> | undefined;
    const fake = await fakeAcceptor((peer) => {
      closed = peer.closed;
      void acceptAs(peer, secret, 'b').then(() =>
        peer.socket.on('data', () => {
          const req = peer.frames.length > 0 ? (unpack(peer.frames.shift()!) as { id: number }) : undefined;
          if (req) peer.send({ t: 'req', id: req.id, from: 'b', op: 'echo', args: 1 });
        }),
      );
    });
    const call = a.send('b', 'echo', 1);
    while (!closed) await new Promise<void>((r) => setImmediate(r));
    const first = await Promise.race([
      call.reply.then(
        () => 'settled',
        () => 'settled',
      ),
      closed.then(() => 'still waiting'),
    ]);
    expect(first).toBe('still waiting');
    call.forget();
  });

  it('a reply of exactly the frame cap still goes', async () => {
    const c = localCoordinator();
    const b = new Rpc(c, 'b', logger().log, { listen: LOOPBACK, addressOf: () => undefined });
    cleanups.push(() => b.close());
    // The reply to the first call (id 1) with a value of n bytes packs to MAX_FRAME_BYTES exactly.
    const overhead = pack({ t: 'res', id: 1, ok: true, value: Buffer.alloc(100_000) }).length - 100_000;
    b.handle('big', async () => Buffer.alloc(MAX_FRAME_BYTES - overhead));
    await b.start();
    const a = new Rpc(c, 'a', logger().log, { listen: LOOPBACK, addressOf: () => b.address });
    cleanups.push(() => a.close());
    await a.start();
    const value = (await a.send('b', 'big', null).reply) as Buffer;
    expect(value.length).toBe(MAX_FRAME_BYTES - overhead);
    expect(a.direct).toBe(1);
  });
});
