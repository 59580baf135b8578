// "Someone's access may have changed": published by every write that can narrow what an account
// sees (team changes, sign-out, password changes, deletions) and delivered to every worker, where
// live streams re-check what their subscribers may still see (docs/protocol.md 11.24). It carries no
// detail on purpose: a receiver re-checks everything it holds, so no change can be missed by a
// wrong guess of whom it touched.
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from '../../platform/cluster/coordinator.js';
import { CHANNELS } from '../../platform/cluster/names.js';

const CHANNEL = CHANNELS.access;

export class AccessSignal {
  private readonly listeners = new Set<() => void>();
  private unsubscribe: Unsubscribe | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.coordinator.subscribe(CHANNEL, () => {
      for (const l of this.listeners) l();
    });
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
    this.listeners.clear();
  }

  on(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Never fails the write that caused it: a lost signal is caught by the streams' periodic re-check. */
  changed(): void {
    this.coordinator.publish(CHANNEL, Buffer.alloc(0)).catch((err: unknown) => {
      this.log.warn({ err }, 'access.signal_failed');
    });
  }
}
