// Direct links that stop carrying frames while their connection stays open (a partition between
// hosts, a peer that stopped reading): declared down after an unanswered ping, their calls re-sent
// through pub/sub and run once; a request read after its deadline is dropped unrun. And the clock
// offset to the coordinator (deadlines in cluster time, the skew report).
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { pack, unpack } from 'msgpackr';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { Rpc } from '../../../src/platform/cluster/rpc.js';
import { ClusterNode } from '../../../src/platform/cluster/cluster-node.js';

type Line = Record<string, unknown> & { msg: string };
function logger() {
  const lines: Line[] = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
  return { log, lines, msgs: (msg: string) => lines.filter((l) => l.msg === msg) };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Polls a counter of the objects under test (a ping timer has no event to await). */
async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Ops = Record<string, { args: unknown; result: unknown }>;

async function pair(ackTimeoutMs = 300) {
  const c = new LocalCoordinator();
  cleanups.push(() => c.close());
  const blog = logger();
  const alog = logger();
  const b = new Rpc<Ops>(c, 'b', blog.log, {
    listen: { host: '127.0.0.1', port: 0, ackTimeoutMs },
    addressOf: () => undefined,
  });
  cleanups.push(() => b.close());
  const runs: unknown[] = [];
  b.handle('echo', async (args) => {
    runs.push(args);
    return args;
  });
  await b.start();
  const a = new Rpc<Ops>(c, 'a', alog.log, {
    listen: { host: '127.0.0.1', port: 0, ackTimeoutMs },
    addressOf: (w) => (w === 'b' ? b.address : undefined),
  });
  cleanups.push(() => a.close());
  await a.start();
  // The link is up and answers pings.
  expect(await a.send('b', 'echo', 'warm', Date.now() + 10_000).reply).toBe('warm');
  expect(a.counters.direct).toBe(1);
  return { c, a, b, runs, alog, blog };
}

describe('a direct link that stops carrying frames', () => {
  it('is declared down after an unanswered ping; its call goes through pub/sub and runs once', async () => {
    const { a, b, runs, alog } = await pair();
    b.freeze(true);
    const call = a.send('b', 'echo', 'during', Date.now() + 10_000);
    expect(await call.reply).toBe('during');
    expect(a.counters.direct).toBe(2); // written to the frozen link first
    expect(a.counters.fallbacks).toBe(1);
    const down = alog.msgs('cluster.peer_link_down');
    expect(down.map((l) => l.reason)).toEqual(['ack_timeout']);
    expect(alog.msgs('cluster.peer_fallback_pubsub').map((l) => l.calls)).toEqual([1]);
    expect(a.linkDowns).toBe(1);
    // New calls meanwhile go through pub/sub (the backoff) and are answered.
    expect(await a.send('b', 'echo', 'later', Date.now() + 10_000).reply).toBe('later');
    // The frozen worker reads again: the first copy is answered from the first run, not run twice.
    b.freeze(false);
    await until(() => b.counters.duplicates === 1);
    expect(runs).toEqual(['warm', 'during', 'later']);
    // And the link comes back after the backoff: a call past it starts a new connection in the background.
    const direct = a.counters.direct;
    for (let i = 0; a.counters.direct === direct; i++) {
      if (i > 500) throw new Error('the link never came back');
      expect(await a.send('b', 'echo', i, Date.now() + 10_000).reply).toBe(i);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(alog.msgs('cluster.peer_link_up')).toHaveLength(2);
  });

  it('never runs a request read after its deadline, by either path', async () => {
    const { a, b, runs, blog } = await pair();
    b.freeze(true);
    // The caller's deadline passes before the link is declared down (about 1.3 s).
    const call = a.send('b', 'echo', 'late', Date.now() + 200);
    // Its pub/sub copy arrives past the deadline: dropped.
    await until(() => b.counters.expired === 1);
    b.freeze(false);
    // The direct copy, read on resume: dropped too.
    await until(() => b.counters.expired === 2);
    call.forget();
    expect(runs).toEqual(['warm']);
    expect(blog.msgs('cluster.frames_expired').length).toBeGreaterThanOrEqual(1);
  });

  it('a copy arriving through pub/sub after the direct one is answered from the first run', async () => {
    const { c, b, runs } = await pair();
    const replies: unknown[] = [];
    await c.subscribe('rpc:x', (m) => replies.push(m));
    const frame = pack({ t: 'req', id: 7, from: 'x', op: 'echo', args: 'once', dl: Date.now() + 10_000 });
    await c.publish('rpc:b', frame);
    await c.publish('rpc:b', frame);
    await until(() => replies.length === 2);
    expect(runs).toEqual(['warm', 'once']);
    expect(b.counters.duplicates).toBe(1);
  });

  it('a second copy read after its deadline is answered from the first run, not run again', async () => {
    const { c, b, runs } = await pair();
    const replies: unknown[] = [];
    await c.subscribe('rpc:x', (m) => replies.push(unpack(m)));
    const dl = Date.now() + 300;
    const frame = pack({ t: 'req', id: 8, from: 'x', op: 'echo', args: 'in time', dl });
    await c.publish('rpc:b', frame);
    await until(() => replies.length === 1);
    while (Date.now() <= dl) await new Promise((r) => setTimeout(r, 20));
    await c.publish('rpc:b', frame);
    await until(() => replies.length === 2);
    expect(b.counters.duplicates).toBe(1);
    expect(b.counters.expired).toBe(0);
    expect(replies[1]).toEqual(replies[0]);
    expect(runs).toEqual(['warm', 'in time']);
  });

  it('a request read after its deadline is answered 503 at once, unrun (its caller does not wait it out)', async () => {
    const { a, b, runs } = await pair();
    b.freeze(true);
    // Written to the frozen link; its pub/sub copy (after the ping timeout) is read past the deadline.
    const call = a.send('b', 'echo', 'late', Date.now() + 200);
    const t0 = performance.now();
    const err = await call.reply.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'unavailable', headers: { 'Retry-After': '3' } });
    // Answered when the copy was read (the link is declared down after 300 ms), not at a deadline of its own.
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(b.counters.expired).toBe(1);
    b.freeze(false);
    expect(runs).toEqual(['warm']);
  });
});

describe('the clock offset to the coordinator', () => {
  it('is measured at start; a skew over a second is logged and reported', async () => {
    const skewed = new LocalCoordinator(() => Date.now() + 5_000); // the coordinator's clock runs ahead
    cleanups.push(() => skewed.close());
    const { log, msgs } = logger();
    const node = new ClusterNode(skewed, log, Date.now);
    cleanups.push(() => node.close());
    await node.start();
    expect(Math.abs(node.clockSkewMs + 5_000)).toBeLessThan(500);
    expect(Math.abs(node.clusterNow() - (Date.now() + 5_000))).toBeLessThan(500);
    expect(msgs('cluster.clock_skew')).toHaveLength(1);
  });

  it("a step of this host's wall clock does not move cluster time (deadlines)", async () => {
    const c = new LocalCoordinator();
    cleanups.push(() => c.close());
    const node = new ClusterNode(c, logger().log, Date.now);
    cleanups.push(() => node.close());
    await node.start();
    const before = node.clusterNow();
    const wall = Date.now;
    // The wall clock steps 30 s ahead, as `date -s` or an NTP step would; the coordinator's does not.
    Date.now = () => wall() + 30_000;
    try {
      expect(Math.abs(node.clusterNow() - before)).toBeLessThan(500);
    } finally {
      Date.now = wall;
    }
  });

  it('a clock in step is not reported', async () => {
    const c = new LocalCoordinator();
    cleanups.push(() => c.close());
    const { log, lines } = logger();
    const node = new ClusterNode(c, log, Date.now);
    cleanups.push(() => node.close());
    await node.start();
    expect(Math.abs(node.clockSkewMs)).toBeLessThan(500);
    expect(lines.filter((l) => l.msg.startsWith('cluster.clock_skew'))).toHaveLength(0);
  });
});
