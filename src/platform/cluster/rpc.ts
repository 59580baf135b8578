// Request/reply between workers: msgpack frames with numeric request ids. Operations are a typed map
// (op name -> argument and result types) declared by the layer that handles them; errors cross as
// WireError. Two paths carry the same frames: a direct, authenticated connection to the peer
// (peer-transport.ts) when its address is known and a connection can be made, else the coordinator's
// pub/sub (the target's `rpc:<worker>` channel, replies on the caller's). A frame goes one way or the
// other, and a frame written to a connection goes again through pub/sub only when that link was
// declared down (peer-transport.ts): the receiver answers a second copy of a request (same caller,
// same id) with the first copy's answer, never running it twice.
//
// Every request carries its deadline (`dl`, in cluster time: this worker's monotonic clock plus its
// measured offset to the coordinator's clock, so hosts with skewed or stepped wall clocks agree on
// it). A request read after its deadline is not run: its caller may have answered its client (503)
// already, and running it then would change state behind that answer (a heartbeat token the client
// never saw). It is answered 503 at once, for a caller still waiting.
import { CHANNELS, pack, unpack } from './names.js';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from './coordinator.js';
import { MAX_FRAME_BYTES, PeerTransport, type ListenOptions } from './peer-transport.js';
import { decodeError, encodeError, type WireError } from './wire-errors.js';
import { AppError } from '../../errors.js';

/** An operation map: `{ 'hb.beat': { args: BeatArgs; result: BeatOutcome }, ... }`. */
export type OpMap = Record<string, { args: unknown; result: unknown }>;

export type OpHandler<Ops extends OpMap, K extends keyof Ops> = (args: Ops[K]['args']) => Promise<Ops[K]['result']>;

// A request id is a number; a string id (builds before the direct transport) is answered as it came.
type Id = number | string;
type Request = { t: 'req'; id: Id; from: string; op: string; args: unknown; dl?: number };
type Response = { t: 'res'; id: Id; ok: true; value: unknown } | { t: 'res'; id: Id; ok: false; error: WireError };
type Frame = Request | Response;

interface RpcOptions {
  /** Listen for direct connections (absent: pub/sub only). */
  listen?: ListenOptions | undefined;
  /** A peer's advertised `host:port` (from membership), if it has one. */
  addressOf: (worker: string) => string | undefined;
  /** Cluster time in ms (deadlines): the local clock corrected by the coordinator's offset. */
  clusterNow?: () => number;
}

/** What rpc counted since it started (metrics). */
interface RpcCounters {
  /** Requests written to a direct connection. */
  direct: number;
  /** Requests published through the coordinator (no address, or no connection could be made). */
  pubsub: number;
  /** Requests re-sent through pub/sub because the link they were written on went down. */
  fallbacks: number;
  /** Requests dropped unrun because they arrived after their deadline. */
  expired: number;
  /** Second copies of a request answered with the first copy's answer. */
  duplicates: number;
  /** Requests published again while their answer was awaited (pub/sub may lose a message). */
  resent: number;
}

/** How long after its deadline a request's answer is kept for a second copy (then the copy is expired anyway). */
const SERVED_KEEP_MS = 1_000;
/** At most one `cluster.frames_expired` line per this many ms (with the count since the last one). */
const EXPIRED_LOG_EVERY_MS = 1_000;

function parse(raw: Buffer): Frame | undefined {
  let f: unknown;
  try {
    f = unpack(raw);
  } catch {
    return undefined;
  }
  if (typeof f !== 'object' || f === null) return undefined;
  const o = f as Record<string, unknown>;
  if (typeof o.id !== 'number' && typeof o.id !== 'string') return undefined;
  if (o.t === 'req' && typeof o.op === 'string' && typeof o.from === 'string') return o as Request;
  if (o.t === 'res' && typeof o.ok === 'boolean') return o as Response;
  return undefined;
}

export class Rpc<Ops extends OpMap> {
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; worker: string; raw: Buffer; direct: boolean }
  >();
  private readonly handlers = new Map<keyof Ops, (args: unknown) => Promise<unknown>>();
  private readonly transport: PeerTransport | undefined;
  /** Answers of requests that carried a deadline, by `<caller> <id>`, kept until SERVED_KEEP_MS past it. */
  private readonly served = new Map<string, { reply: Promise<Response>; until: number }>();
  private unsub: Unsubscribe | undefined;
  private seq = 0;
  private expiredUnlogged = 0;
  private expiredLoggedAt = 0;
  readonly counters: RpcCounters = { direct: 0, pubsub: 0, fallbacks: 0, expired: 0, duplicates: 0, resent: 0 };
  private readonly clusterNow: () => number;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly id: string,
    private readonly log: Logger,
    private readonly opts: RpcOptions = { addressOf: () => undefined },
  ) {
    this.clusterNow = opts.clusterNow ?? Date.now;
    if (opts.listen)
      this.transport = new PeerTransport(coordinator, id, log, opts.listen, {
        request: (raw) => {
          const f = parse(raw);
          return f?.t === 'req' ? this.accept(f).then((r) => this.encodeReply(r)) : null;
        },
        reply: (raw) => {
          const f = parse(raw);
          if (f?.t !== 'res') return false;
          this.settle(f);
          return true;
        },
        down: (peer) => this.linkDown(peer),
      });
  }

  /** Requests written to a direct connection. */
  get direct(): number {
    return this.counters.direct;
  }

  /** Requests published through the coordinator. */
  get pubsub(): number {
    return this.counters.pubsub;
  }

  /** Links to peers with an authenticated connection now. */
  get linksUp(): number {
    return this.transport?.linksUp ?? 0;
  }

  /** Links declared down since start. */
  get linkDowns(): number {
    return this.transport?.counters.downs ?? 0;
  }

  /** Test hook (FAULT_PEER_FREEZE): stop or resume reading the connections peers opened to this worker. */
  freeze(on: boolean): void {
    this.transport?.freeze(on);
  }

  /** `host:port` this worker takes direct calls at; undefined without a listener. */
  get address(): string | undefined {
    return this.transport?.address;
  }

  handle<K extends keyof Ops & string>(op: K, handler: OpHandler<Ops, K>): void {
    this.handlers.set(op, handler as (args: unknown) => Promise<unknown>);
  }

  async start(): Promise<void> {
    // Pub/sub stays subscribed: the fallback path, and calls from peers that cannot reach the listener.
    this.unsub = await this.coordinator.subscribe(CHANNELS.rpc(this.id), (m) => void this.onPublished(m));
    await this.transport?.start();
  }

  /** Re-reads the cluster secret (every tick). */
  async refresh(): Promise<void> {
    await this.transport?.refreshSecret();
  }

  /**
   * Sends one request; `reply` settles with the answer (no timeout of its own). `forget` drops it.
   * `again` publishes a request with a deadline once more when it went through pub/sub, which
   * delivers at most once (a message published while the receiver re-subscribes, after a Redis
   * restart, is lost): the receiver runs a request once and answers a second copy from the first.
   */
  send<K extends keyof Ops & string>(
    worker: string,
    op: K,
    args: Ops[K]['args'],
    /** Cluster time past which the receiver must not run it (absent: none). */
    deadline?: number,
  ): { reply: Promise<Ops[K]['result']>; forget: () => void; again: () => void } {
    const id = ++this.seq;
    const reply = new Promise<unknown>((resolve, reject) => {
      const frame: Frame =
        deadline === undefined
          ? { t: 'req', id, from: this.id, op, args }
          : { t: 'req', id, from: this.id, op, args, dl: Math.round(deadline) };
      const raw = pack(frame);
      this.pending.set(id, { resolve, reject, worker, raw, direct: false });
      this.deliver(worker, id, raw).catch((err: unknown) => {
        this.pending.delete(id);
        // Neither path reached the worker (Redis is down too): fail fast, the client retries.
        this.log.warn({ err, worker, op }, 'cluster.call_undeliverable');
        reject(unavailable());
      });
    });
    reply.catch(() => undefined); // settled after the caller gave up: nobody is listening any more
    return {
      reply: reply as Promise<Ops[K]['result']>,
      forget: () => this.pending.delete(id),
      again: () => {
        const p = this.pending.get(id);
        if (!p || p.direct || deadline === undefined || this.clusterNow() > deadline) return;
        this.counters.resent++;
        this.coordinator.publish(CHANNELS.rpc(worker), p.raw).catch(() => undefined);
      },
    };
  }

  private async deliver(worker: string, id: number, raw: Buffer): Promise<void> {
    const address = this.transport && this.opts.addressOf(worker);
    if (address) {
      // Marked before the write: a link that goes down at once hands this call back (linkDown).
      const p = this.pending.get(id);
      if (p) p.direct = true;
      if (await this.transport!.send(worker, address, raw)) {
        this.counters.direct++;
        return;
      }
      if (p) p.direct = false;
    }
    // The caller gave up while a connection was being tried: the call must not run after all.
    if (!this.pending.has(id)) return;
    this.counters.pubsub++;
    await this.coordinator.publish(CHANNELS.rpc(worker), raw);
  }

  /**
   * The link to `peer` went down: the calls written on it may be lost in it (or read much later,
   * when their deadline has passed and the receiver drops them), so each goes again through pub/sub.
   * A copy that got through after all is answered once: the receiver keeps the first answer.
   */
  private linkDown(peer: string): void {
    let n = 0;
    for (const [id, p] of this.pending) {
      if (p.worker !== peer || !p.direct) continue;
      p.direct = false;
      n++;
      this.counters.fallbacks++;
      this.counters.pubsub++;
      this.coordinator.publish(CHANNELS.rpc(peer), p.raw).catch((err: unknown) => {
        if (!this.pending.delete(id)) return;
        this.log.warn({ err, peer }, 'cluster.fallback_failed');
        p.reject(unavailable());
      });
    }
    if (n > 0) this.log.warn({ peer, calls: n }, 'cluster.peer_fallback_pubsub');
  }

  private settle(f: Response): void {
    if (typeof f.id !== 'number') return;
    const p = this.pending.get(f.id);
    if (!p) return;
    this.pending.delete(f.id);
    if (f.ok) p.resolve(f.value);
    else p.reject(decodeError(f.error));
  }

  /**
   * A request to run: its answer. A second copy (same caller and id: the first went over a link that
   * then went down, or pub/sub was asked again) gets the first copy's answer; a first copy read past
   * its deadline is not run and is answered 503 (docs/multi-host.md "Clocks").
   */
  private accept(f: Request): Promise<Response> {
    if (typeof f.dl !== 'number') return this.serve(f);
    const now = this.clusterNow();
    const key = `${f.from} ${String(f.id)}`;
    const seen = this.served.get(key);
    if (seen) {
      this.counters.duplicates++;
      return seen.reply;
    }
    // Past its deadline it is not run. Its caller may still be waiting (the clocks disagreed, the
    // frame was slow): it is answered at once, a 503 the client retries, never left to its own deadline.
    if (now > f.dl) {
      this.expired(f, now);
      return Promise.resolve({ t: 'res', id: f.id, ok: false, error: encodeError(unavailable()) });
    }
    this.sweepServed(now);
    const reply = this.serve(f);
    this.served.set(key, { reply, until: f.dl + SERVED_KEEP_MS });
    return reply;
  }

  private sweepServed(now: number): void {
    // Deadlines are roughly in arrival order: stop at the first one still live.
    for (const [key, s] of this.served) {
      if (s.until > now) break;
      this.served.delete(key);
    }
  }

  private expired(f: Request, now: number): void {
    this.counters.expired++;
    this.expiredUnlogged++;
    if (now - this.expiredLoggedAt < EXPIRED_LOG_EVERY_MS) return;
    this.log.warn(
      { count: this.expiredUnlogged, from: f.from, op: f.op, lateMs: now - f.dl! },
      'cluster.frames_expired',
    );
    this.expiredUnlogged = 0;
    this.expiredLoggedAt = now;
  }

  private async serve(f: Request): Promise<Response> {
    try {
      const handler = this.handlers.get(f.op);
      if (!handler) throw new Error(`no handler for ${f.op}`);
      return { t: 'res', id: f.id, ok: true, value: await handler(f.args) };
    } catch (err) {
      return { t: 'res', id: f.id, ok: false, error: encodeError(err) };
    }
  }

  private encodeReply(r: Response): Buffer {
    const raw = pack(r);
    if (raw.length <= MAX_FRAME_BYTES) return raw;
    this.log.error({ id: r.id, bytes: raw.length }, 'cluster.reply_too_large');
    return pack({ t: 'res', id: r.id, ok: false, error: encodeError(new Error('reply too large')) });
  }

  private async onPublished(raw: Buffer): Promise<void> {
    const f = parse(raw);
    if (!f) return;
    if (f.t === 'res') return this.settle(f);
    const reply = await this.accept(f);
    await this.coordinator
      .publish(CHANNELS.rpc(f.from), pack(reply))
      .catch((err: unknown) => this.log.warn({ err }, 'cluster.reply_failed'));
  }

  /** Stops listening, ends direct connections and fails the calls still waiting. */
  async close(): Promise<void> {
    await this.unsub?.();
    await this.transport?.close();
    for (const p of this.pending.values()) p.reject(new Error('cluster node closed'));
    this.pending.clear();
  }
}

/** No path to the owner worked: the client retries shortly (a signed 503). */
export function unavailable(): AppError {
  return new AppError('unavailable', undefined, { 'Retry-After': '3' });
}
