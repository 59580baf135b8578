// Request/reply between workers over the coordination port: msgpack frames on the target's
// `rpc:<worker>` channel, replies on the caller's. Operations are a typed map (op name -> argument
// and result types) declared by the layer that handles them; errors cross as WireError.
import { randomUUID } from 'node:crypto';
import { pack, unpack } from 'msgpackr';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from './coordinator.js';
import { decodeError, encodeError, type WireError } from './wire-errors.js';

/** An operation map: `{ 'hb.beat': { args: BeatArgs; result: BeatOutcome }, ... }`. */
export type OpMap = Record<string, { args: unknown; result: unknown }>;

export type OpHandler<Ops extends OpMap, K extends keyof Ops> = (args: Ops[K]['args']) => Promise<Ops[K]['result']>;

type Frame =
  | { t: 'req'; id: string; from: string; op: string; args: unknown }
  | { t: 'res'; id: string; ok: true; value: unknown }
  | { t: 'res'; id: string; ok: false; error: WireError };

export class Rpc<Ops extends OpMap> {
  private readonly pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly handlers = new Map<keyof Ops, (args: unknown) => Promise<unknown>>();
  private unsub: Unsubscribe | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly id: string,
    private readonly log: Logger,
  ) {}

  handle<K extends keyof Ops & string>(op: K, handler: OpHandler<Ops, K>): void {
    this.handlers.set(op, handler as (args: unknown) => Promise<unknown>);
  }

  async start(): Promise<void> {
    this.unsub = await this.coordinator.subscribe(`rpc:${this.id}`, (m) => void this.onFrame(m));
  }

  /** Publishes one request; `reply` settles with the answer (no timeout of its own). `forget` drops it. */
  send<K extends keyof Ops & string>(
    worker: string,
    op: K,
    args: Ops[K]['args'],
  ): { reply: Promise<Ops[K]['result']>; forget: () => void } {
    const id = randomUUID();
    const reply = new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const frame: Frame = { t: 'req', id, from: this.id, op, args };
      this.coordinator.publish(`rpc:${worker}`, pack(frame)).catch((err: unknown) => {
        this.pending.delete(id);
        reject(err as Error);
      });
    });
    reply.catch(() => undefined); // settled after the caller gave up: nobody is listening any more
    return { reply: reply as Promise<Ops[K]['result']>, forget: () => this.pending.delete(id) };
  }

  private async onFrame(raw: Buffer): Promise<void> {
    let f: Frame;
    try {
      f = unpack(raw) as Frame;
    } catch {
      return;
    }
    if (f.t === 'res') {
      const p = this.pending.get(f.id);
      if (!p) return;
      this.pending.delete(f.id);
      if (f.ok) p.resolve(f.value);
      else p.reject(decodeError(f.error));
      return;
    }
    let reply: Frame;
    try {
      const handler = this.handlers.get(f.op);
      if (!handler) throw new Error(`no handler for ${f.op}`);
      reply = { t: 'res', id: f.id, ok: true, value: await handler(f.args) };
    } catch (err) {
      reply = { t: 'res', id: f.id, ok: false, error: encodeError(err) };
    }
    await this.coordinator
      .publish(`rpc:${f.from}`, pack(reply))
      .catch((err: unknown) => this.log.warn({ err }, 'cluster.reply_failed'));
  }

  async close(): Promise<void> {
    await this.unsub?.();
    for (const p of this.pending.values()) p.reject(new Error('cluster node closed'));
    this.pending.clear();
  }
}
