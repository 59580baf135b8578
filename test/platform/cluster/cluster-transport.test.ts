// Worker-to-worker calls over direct, authenticated connections, with Redis pub/sub only as
// the fallback. Real ClusterNodes on a real Redis (a unique prefix per cluster), real sockets, and a
// worker in a child process for the kill.
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { pack, unpack } from 'msgpackr';
import {
  ClusterNode,
  SHARD_COUNT,
  rendezvous,
  type ListenOptions,
} from '../../../src/platform/cluster/cluster-node.js';
import { RedisCoordinator } from '../../../src/platform/cluster/redis.coordinator.js';
import { FrameReader, HANDSHAKE_TIMEOUT_MS, parseAddress } from '../../../src/platform/cluster/peer-transport.js';
import { AppError } from '../../../src/errors.js';
import { REDIS_URL, redisAvailable } from '../../helpers/services.js';
import { createTestDatabase, startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, nextIp } from '../../helpers/fixture.js';
import { ClientApi, hwid } from '../../helpers/client.js';
import { shardOf } from '../../../src/platform/cluster/cluster-node.js';

const hasRedis = await redisAvailable();
const log = pino({ level: 'silent' });
const LOOPBACK: ListenOptions = { host: '127.0.0.1', port: 0 };

interface Member {
  node: ClusterNode;
  coordinator: RedisCoordinator;
}

function member(prefix: string, listen: ListenOptions | undefined): Member {
  const coordinator = new RedisCoordinator(REDIS_URL, prefix);
  return { coordinator, node: new ClusterNode(coordinator, log, Date.now, { listen }) };
}

async function stop(members: Member[]): Promise<void> {
  for (const m of members) {
    await m.node.close().catch(() => undefined);
    await m.coordinator.close();
  }
}

/** Ticks until every node sees `n` members and the shards are split as rendezvous says. */
async function settle(
  nodes: Pick<ClusterNode, 'tick' | 'id' | 'memberCount' | 'ownedShards'>[],
  ids: string[],
): Promise<void> {
  const sorted = [...ids].sort();
  for (let round = 0; round < 60; round++) {
    await Promise.all(nodes.map((n) => n.tick()));
    const split = nodes.every((n) => {
      let mine = 0;
      for (let s = 0; s < SHARD_COUNT; s++) if (rendezvous(s, sorted) === n.id) mine++;
      return n.memberCount === ids.length && n.ownedShards === mine;
    });
    if (split) return;
  }
  throw new Error('the cluster did not settle');
}

function shardOwnedBy(node: ClusterNode): number {
  for (let s = 0; s < SHARD_COUNT; s++) if (node.fenceOf(s) !== undefined) return s;
  throw new Error('node owns no shard');
}

const mustNotRunHere = async (): Promise<never> => {
  throw new Error('must run on the owner');
};

/** A raw TCP client speaking (or abusing) the peer protocol. */
function rawPeer(address: string) {
  const target = parseAddress(address)!;
  const socket = net.connect({ host: target.host, port: target.port });
  const reader = new FrameReader(1 << 20);
  const frames: Record<string, unknown>[] = [];
  let wake: (() => void) | undefined;
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    for (const f of reader.push(chunk)) frames.push(unpack(f) as Record<string, unknown>);
    wake?.();
  });
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  return {
    socket,
    frames,
    closed,
    async next(): Promise<Record<string, unknown>> {
      while (frames.length === 0) await new Promise<void>((r) => (wake = r));
      return frames.shift()!;
    },
    sendFrame(payload: Buffer): void {
      const head = Buffer.alloc(4);
      head.writeUInt32BE(payload.length);
      socket.write(Buffer.concat([head, payload]));
    },
  };
}

describe('peer frames', () => {
  const framed = (payload: Buffer) => {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(payload.length);
    return Buffer.concat([head, payload]);
  };

  it('are cut out of a stream however it is chunked', () => {
    const payloads = [Buffer.from('one'), Buffer.alloc(0), randomBytes(300), Buffer.from('last')];
    const stream = Buffer.concat(payloads.map(framed));
    for (const size of [1, 3, 5, 64, stream.length]) {
      const reader = new FrameReader(1024);
      const out: Buffer[] = [];
      for (let i = 0; i < stream.length; i += size) out.push(...reader.push(stream.subarray(i, i + size)));
      expect(out).toEqual(payloads);
    }
  });

  it('refuse a frame over the cap as soon as its length is read', () => {
    const reader = new FrameReader(512);
    expect(reader.push(framed(Buffer.alloc(512)))).toHaveLength(1);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(513);
    expect(() => reader.push(head)).toThrow(/over the 512 byte cap/);
  });
});

describe.skipIf(!hasRedis)('direct worker-to-worker calls', () => {
  const prefix = `kwt${randomBytes(4).toString('hex')}:`;
  let a: Member;
  let b: Member;
  let echoes = 0;

  beforeAll(async () => {
    a = member(prefix, LOOPBACK);
    b = member(prefix, LOOPBACK);
    await a.node.start();
    await b.node.start();
    await settle([a.node, b.node], [a.node.id, b.node.id]);
    b.node.handle('echo', async (args) => {
      echoes++;
      return { echoed: args, by: 'b' };
    });
  });
  afterAll(() => stop([a, b]));

  it('each worker advertises a loopback address; a forwarded operation goes over the direct connection', async () => {
    expect(a.node.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(b.node.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const shard = shardOwnedBy(b.node);
    const before = { direct: a.node.directCalls, pubsub: a.node.pubsubCalls };
    expect(await a.node.route(shard, 'echo', { n: 1 }, mustNotRunHere)).toEqual({ echoed: { n: 1 }, by: 'b' });
    // Pipelined on the one connection: every answer reaches its own caller.
    const many = await Promise.all(
      Array.from({ length: 200 }, (_, i) => a.node.route(shard, 'echo', { n: i }, mustNotRunHere)),
    );
    expect(many).toEqual(Array.from({ length: 200 }, (_, i) => ({ echoed: { n: i }, by: 'b' })));
    expect(a.node.directCalls - before.direct).toBe(201);
    expect(a.node.pubsubCalls).toBe(before.pubsub);
  });

  it('refuses unauthenticated, forged and garbage connections and keeps serving', async () => {
    const address = b.node.address!;
    const echoesBefore = echoes;

    // Bytes that are not the protocol (an HTTP request: its first 4 bytes announce a huge frame).
    const http = rawPeer(address);
    http.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await http.closed;

    // A request before any authentication.
    const eager = rawPeer(address);
    expect(await eager.next()).toMatchObject({ t: 'hello', id: b.node.id });
    eager.sendFrame(pack({ t: 'req', id: 1, from: 'intruder', op: 'echo', args: { n: -1 } }));
    await eager.closed;

    // An auth frame without the cluster secret.
    const forged = rawPeer(address);
    expect(await forged.next()).toMatchObject({ t: 'hello' });
    forged.sendFrame(pack({ t: 'auth', id: 'intruder', nonce: randomBytes(32), mac: randomBytes(32) }));
    await forged.closed;
    expect(forged.frames).toEqual([]); // no `ok`

    // Not msgpack at all, under the size cap.
    const junk = rawPeer(address);
    await junk.next();
    junk.sendFrame(randomBytes(64));
    await junk.closed;

    // Silence: closed once the handshake time is up.
    const silent = rawPeer(address);
    const t0 = performance.now();
    await silent.closed;
    expect(performance.now() - t0).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 100);
    expect(performance.now() - t0).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 1_500);

    expect(echoes).toBe(echoesBefore);
    const direct = a.node.directCalls;
    expect(await a.node.route(shardOwnedBy(b.node), 'echo', { n: 2 }, mustNotRunHere)).toEqual({
      echoed: { n: 2 },
      by: 'b',
    });
    expect(a.node.directCalls).toBe(direct + 1);
  });
});

describe.skipIf(!hasRedis)('a peer without a usable address', () => {
  const prefix = `kwt${randomBytes(4).toString('hex')}:`;
  let a: Member;
  let unreachable: Member;
  let silent: Member;

  beforeAll(async () => {
    a = member(prefix, LOOPBACK);
    // Listens on 127.0.0.1 but tells the others 127.0.0.2, where nothing listens: connections are refused.
    unreachable = member(prefix, { host: '127.0.0.1', port: 0, advertiseHost: '127.0.0.2' });
    // No listener at all: no address in membership.
    silent = member(prefix, undefined);
    for (const m of [a, unreachable, silent]) await m.node.start();
    await settle([a.node, unreachable.node, silent.node], [a.node.id, unreachable.node.id, silent.node.id]);
    unreachable.node.handle('echo', async (args) => ({ echoed: args, by: 'unreachable' }));
    silent.node.handle('echo', async (args) => ({ echoed: args, by: 'silent' }));
    a.node.handle('echo', async (args) => ({ echoed: args, by: 'a' }));
  });
  afterAll(() => stop([a, unreachable, silent]));

  it('is called through Redis pub/sub, and a reachable one still directly', async () => {
    const before = { direct: a.node.directCalls, pubsub: a.node.pubsubCalls };
    const r1 = await a.node.route(shardOwnedBy(unreachable.node), 'echo', { n: 1 }, mustNotRunHere);
    expect(r1).toEqual({ echoed: { n: 1 }, by: 'unreachable' });
    const r2 = await a.node.route(shardOwnedBy(silent.node), 'echo', { n: 2 }, mustNotRunHere);
    expect(r2).toEqual({ echoed: { n: 2 }, by: 'silent' });
    expect(a.node.pubsubCalls - before.pubsub).toBe(2);
    expect(a.node.directCalls).toBe(before.direct);
    // The other way round the address is good: direct.
    const r3 = await unreachable.node.route(shardOwnedBy(a.node), 'echo', { n: 3 }, mustNotRunHere);
    expect(r3).toEqual({ echoed: { n: 3 }, by: 'a' });
    expect(unreachable.node.directCalls).toBe(1);
    expect(unreachable.node.pubsubCalls).toBe(0);
  });
});

describe.skipIf(!hasRedis)('a worker killed in the middle of a direct call', () => {
  const prefix = `kwt${randomBytes(4).toString('hex')}:`;
  let a: Member;
  let c: Member;
  const children: ReturnType<typeof spawn>[] = [];
  afterAll(async () => {
    for (const ch of children) if (ch.exitCode === null && ch.signalCode === null) ch.kill('SIGKILL');
    await stop([a, c]);
  });

  it("the caller gets the new owner's answer, the op ran once on each owner, never twice on one", async () => {
    a = member(prefix, LOOPBACK);
    c = member(prefix, LOOPBACK);
    await a.node.start();
    await c.node.start();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(import.meta.dirname, 'cluster-peer.fixture.ts'), REDIS_URL, prefix],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    const lines: string[] = [];
    let onLine: (() => void) | undefined;
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        onLine?.();
      }
    });
    const line = async (start: string): Promise<string> => {
      for (;;) {
        const found = lines.find((l) => l.startsWith(start));
        if (found) return found;
        if (child.exitCode !== null) throw new Error('the peer process exited');
        await new Promise<void>((r) => (onLine = r));
      }
    };
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const b = (await line('ready ')).slice('ready '.length);
    // The child ticks on its own timer; ours are ticked here until all three split the shards.
    const ids = [a.node.id, b, c.node.id].sort();
    for (let round = 0; round < 60 && !(a.node.memberCount === 3 && c.node.memberCount === 3); round++)
      await Promise.all([a.node.tick(), c.node.tick()]);
    // A shard the child owns now and that goes to c once the child is gone.
    let shard = -1;
    for (let s = 0; s < SHARD_COUNT && shard < 0; s++)
      if (rendezvous(s, ids) === b && rendezvous(s, [a.node.id, c.node.id].sort()) === c.node.id) shard = s;
    expect(shard).toBeGreaterThanOrEqual(0);
    for (let i = 0; (await a.node.ownerOf(shard, true)) !== b; i++) {
      if (i > 200) throw new Error('the child never took its shard');
      await new Promise((r) => setTimeout(r, 50)); // the child's own tick timer is what we wait for
    }

    let cRuns = 0;
    c.node.handle('stall', async (args) => {
      cRuns++;
      return { by: 'c', args };
    });
    const direct = a.node.directCalls;
    const pubsub = a.node.pubsubCalls;
    const call = a.node.route(shard, 'stall', { n: 1 }, mustNotRunHere).catch((e: unknown) => e);
    await line('running ');
    child.kill('SIGKILL');
    await exited;
    const result = await call;
    // The child's lease expires within 4 s and c takes the shard, well inside the 12 s route deadline;
    // a 503 would also be an acceptable outcome, a 500 or a second answer would not.
    if (result instanceof AppError) expect(result.code).toBe('unavailable');
    else expect(result).toEqual({ by: 'c', args: { n: 1 } });
    expect(lines.filter((l) => l.startsWith('running '))).toHaveLength(1);
    expect(cRuns).toBe(result instanceof AppError ? 0 : 1);
    expect(a.node.directCalls - direct).toBe(result instanceof AppError ? 1 : 2);
    // The connection closed under the call: it went again through pub/sub (to a channel nobody reads).
    expect(a.node.pubsubCalls).toBe(pubsub + 1);
    expect(a.node.fallbackCalls).toBe(1);
  }, 30_000);
});

describe.skipIf(!hasRedis)('two servers on Redis', () => {
  let workers: TestServer[] = [];
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    const env = { REDIS_URL, REDIS_PREFIX: `kwts${randomBytes(4).toString('hex')}:` };
    // One DATA_DIR: the two share their secrets, as workers of one deployment do.
    const first = await startTestServer(env, { databaseUrl: db.url });
    workers = [first, await startTestServer(env, { databaseUrl: db.url, dataDir: first.dataDir })];
    const nodes = workers.map((w) => w.server.app.domain.node);
    await settle(
      nodes,
      nodes.map((n) => n.id),
    );
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) await w.server.shutdown('test').catch(() => undefined);
    if (workers[0]) await fs.rm(workers[0].dataDir, { recursive: true, force: true });
    await drop?.();
  });

  async function metric(w: TestServer, name: string): Promise<number> {
    const text = await (await fetch(`${w.base}/metrics`)).text();
    const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  }

  it('forward heartbeats directly, as /metrics shows', async () => {
    const f = await appFixture(workers[0]!, { heartbeat_interval: 30 });
    const [key] = await f.keys(1);
    // A session whose shard the second worker owns (opened there), used through the first.
    let session = '';
    for (let i = 0; i < 20; i++) {
      const opener = new ClientApi(workers[1]!.base);
      opener.extraHeaders['x-forwarded-for'] = nextIp();
      session = await f.session(opener);
      if (workers[1]!.server.app.domain.node.fenceOf(shardOf(session)) !== undefined) break;
    }
    const c = f.client();
    expect(workers[1]!.server.app.domain.node.fenceOf(shardOf(session))).toBeDefined();
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(1) })).status).toBe(200);
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: 'transport-sys' });
    expect(start.status).toBe(200);
    const beat = await c.post('/api/client/heartbeat', {
      session,
      token: start.body.token,
      system_id: 'transport-sys',
      beat_index: 1,
      code_hash: 'ab'.repeat(16),
    });
    expect(beat.status).toBe(200);
    expect(await metric(workers[0]!, 'keywarden_cluster_direct_total')).toBeGreaterThanOrEqual(2);
    expect(await metric(workers[0]!, 'keywarden_cluster_pubsub_total')).toBe(0);
    expect(await metric(workers[1]!, 'keywarden_cluster_pubsub_total')).toBe(0);
  });
});
