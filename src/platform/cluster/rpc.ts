// Request/reply between workers: msgpack frames with numeric request ids. Operations are a typed map
// (op name -> argument and result types) declared by the layer that handles them; errors cross as
// WireError. Two paths carry the same frames: a direct, authenticated connection to the peer
// (peer-transport.ts) when its address is known and a connection can be made, else the coordinator's
// pub/sub (the target's `rpc:<worker>` channel, replies on the caller's). A frame goes one way or the
// other, never both: once written to a connection it is not sent again (see ClusterNode.callOwner).
import { pack, unpack } from 'msgpackr';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from './coordinator.js';
import { MAX_FRAME_BYTES, PeerTransport, type ListenOptions } from './peer-transport.js';
import { decodeError, encodeError, type WireError } from './wire-errors.js';

/** An operation map: `{ 'hb.beat': { args: BeatArgs; result: BeatOutcome }, ... }`. */
export type OpMap = Record<string, { args: unknown; result: unknown }>;

export type OpHandler<Ops extends OpMap, K extends keyof Ops> = (args: Ops[K]['args']) => Promise<Ops[K]['result']>;

// A request id is a number; a string id (builds before the direct transport) is answered as it came.
type Id = number | string;
type Request = { t: 'req'; id: Id; from: string; op: string; args: unknown };
type Response = { t: 'res'; id: Id; ok: true; value: unknown } | { t: 'res'; id: Id; ok: false; error: WireError };
type Frame = Request | Response;

interface RpcOptions {
  /** Listen for direct connections (absent: pub/sub only). */
  listen?: ListenOptions | undefined;
  /** A peer's advertised `host:port` (from membership), if it has one. */
  addressOf: (worker: string) => string | undefined;
}

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
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly handlers = new Map<keyof Ops, (args: unknown) => Promise<unknown>>();
  private readonly transport: PeerTransport | undefined;
  private unsub: Unsubscribe | undefined;
  private seq = 0;
  /** Requests written to a direct connection. */
  direct = 0;
  /** Requests published through the coordinator (no address, or no connection could be made). */
  pubsub = 0;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly id: string,
    private readonly log: Logger,
    private readonly opts: RpcOptions = { addressOf: () => undefined },
  ) {
    if (opts.listen)
      this.transport = new PeerTransport(coordinator, id, log, opts.listen, {
        request: (raw) => {
          const f = parse(raw);
          return f?.t === 'req' ? this.serve(f).then((r) => this.encodeReply(r)) : null;
        },
        reply: (raw) => {
          const f = parse(raw);
          if (f?.t !== 'res') return false;
          this.settle(f);
          return true;
        },
      });
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
    this.unsub = await this.coordinator.subscribe(`rpc:${this.id}`, (m) => void this.onPublished(m));
    await this.transport?.start();
  }

  /** Re-reads the cluster secret (every tick). */
  async refresh(): Promise<void> {
    await this.transport?.refreshSecret();
  }

  /** Sends one request; `reply` settles with the answer (no timeout of its own). `forget` drops it. */
  send<K extends keyof Ops & string>(
    worker: string,
    op: K,
    args: Ops[K]['args'],
  ): { reply: Promise<Ops[K]['result']>; forget: () => void } {
    const id = ++this.seq;
    const reply = new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const frame: Frame = { t: 'req', id, from: this.id, op, args };
      this.deliver(worker, id, pack(frame)).catch((err: unknown) => {
        this.pending.delete(id);
        reject(err as Error);
      });
    });
    reply.catch(() => undefined); // settled after the caller gave up: nobody is listening any more
    return { reply: reply as Promise<Ops[K]['result']>, forget: () => this.pending.delete(id) };
  }

  private async deliver(worker: string, id: number, raw: Buffer): Promise<void> {
    const address = this.transport && this.opts.addressOf(worker);
    if (address && (await this.transport!.send(worker, address, raw))) {
      this.direct++;
      return;
    }
    // The caller gave up while a connection was being tried: the call must not run after all.
    if (!this.pending.has(id)) return;
    this.pubsub++;
    await this.coordinator.publish(`rpc:${worker}`, raw);
  }

  private settle(f: Response): void {
    if (typeof f.id !== 'number') return;
    const p = this.pending.get(f.id);
    if (!p) return;
    this.pending.delete(f.id);
    if (f.ok) p.resolve(f.value);
    else p.reject(decodeError(f.error));
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
    const reply = await this.serve(f);
    await this.coordinator
      .publish(`rpc:${f.from}`, pack(reply))
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
