// Live events (docs/spec.md "Live update stream"): published once through the coordinator, delivered to
// every worker, where dashboards subscribed to the app receive them (live.ts) and heartbeats react
// to revocations. Kinds are the dotted audit names: license.generate, license.ban, user.delete...
import { randomUUID } from 'node:crypto';
import { CHANNELS, pack, unpack } from '../../platform/cluster/names.js';
import type { Logger } from 'pino';
import type { Coordinator, Unsubscribe } from '../../platform/cluster/coordinator.js';

export interface LiveEvent {
  id: string;
  kind: string;
  app_id: string;
  at: string;
  data: Record<string, unknown>;
  /** Owner of the affected record for reseller scoping (not sent to dashboards). */
  reseller_id: string | null;
}

type EventListener = (e: LiveEvent) => void;

const CHANNEL = CHANNELS.events;

export class EventBus {
  private readonly listeners = new Set<EventListener>();
  private unsubscribe: Unsubscribe | undefined;

  constructor(
    private readonly coordinator: Coordinator,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.coordinator.subscribe(CHANNEL, (msg) => {
      let e: LiveEvent;
      try {
        e = unpack(msg) as LiveEvent;
      } catch (err) {
        this.log.warn({ err }, 'events.bad_frame');
        return;
      }
      for (const l of this.listeners) {
        try {
          l(e);
        } catch (err) {
          this.log.error({ err, kind: e.kind }, 'events.listener_failed');
        }
      }
    });
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
    this.listeners.clear();
  }

  on(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * An event about one account rather than an application (its credit balance, its bulk jobs' progress):
   * delivered to that account's open dashboard streams, whatever apps they watch. `kind` starts with
   * `account.` or `job.`.
   */
  publishAccount(
    kind: `account.${string}` | `job.${string}`,
    accountId: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    return this.publish(kind, '', { ...data, account_id: accountId });
  }

  async publish(
    kind: string,
    appId: string,
    data: Record<string, unknown>,
    resellerId: string | null = null,
  ): Promise<void> {
    const e: LiveEvent = {
      id: randomUUID(),
      kind,
      app_id: appId,
      at: new Date(this.now()).toISOString(),
      data,
      reseller_id: resellerId,
    };
    await this.coordinator.publish(CHANNEL, pack(e));
  }
}
