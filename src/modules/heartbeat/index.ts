// The heartbeat module's public surface: heartbeat sessions: the receiving gateway and the shard owner.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { ShardNode } from '../../platform/cluster/cluster-node.js';
import type { Metrics } from '../../platform/http/metrics.js';
import type { Router } from '../../platform/http/router.js';
import type { AuditRepository } from '../audit/index.js';
import type { ClientDeps, ClientSessions } from '../client/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import { BeatCounts } from './beat-counts.js';
import { ExpiryWatch } from './expiry-watch.js';
import { HeartbeatGateway } from './heartbeat.gateway.js';
import { type HeartbeatOps, HeartbeatOwner } from './heartbeat.owner.js';
import { heartbeatRoutes } from './heartbeat.routes.js';

export { beatInterval } from './beat-interval.js';
export { expiryWindowMs } from './heartbeat.machine.js';
export type { HeartbeatGateway, HeartbeatOps, HeartbeatOwner };

/** How often a worker adds the beats it counted to beat_counts (a chart lags by at most this). */
const BEAT_FLUSH_MS = 10_000;

type GatewayDeps = ConstructorParameters<typeof HeartbeatGateway>[0];
type WatchDeps = ConstructorParameters<typeof ExpiryWatch>[0];

interface HeartbeatDeps {
  log: Logger;
  now: () => number;
  coordinator: Coordinator;
  node: ShardNode<HeartbeatOps>;
  sessions: ClientSessions;
  audit: AuditRepository;
  events: EventBus;
  webhooks: Pick<WebhookService, 'notify'>;
  /** HEARTBEAT_MAX_LIVE_ACTORS. */
  maxLiveActors: number;
  /** One process alone: sessions are checkpointed to PostgreSQL instead of living in Redis. */
  checkpointed: boolean;
  /** Ports compose.ts fills: a key's seat policy (keys), a license's grace (activation). */
  keySeats: GatewayDeps['keySeats'];
  grace: NonNullable<GatewayDeps['grace']>;
  /** Keys and end users expiring (the keys module's reads). */
  expiring: Pick<WatchDeps, 'keys' | 'users'>;
  /** Where flushed beat counts are added (the keys module's beat_counts). */
  beatStore: ConstructorParameters<typeof BeatCounts>[0];
  /** Whether this worker announces expiries (the holder of shard 0). */
  isLeader: () => boolean;
}

/** Builds the heartbeat module: the shard owner, the receiving gateway, the beat counts and the expiry watch. */
export function createHeartbeat(d: HeartbeatDeps) {
  const { now, log } = d;
  // The owner registers its shard handlers and operations on the node itself.
  const owner = new HeartbeatOwner({
    now,
    log,
    sessions: d.sessions,
    audit: d.audit,
    coordinator: d.coordinator,
    node: d.node,
    maxLiveActors: d.maxLiveActors,
    checkpointed: d.checkpointed,
  });
  const beatCounts = new BeatCounts(d.beatStore, log);
  const gateway = new HeartbeatGateway({
    now,
    log,
    sessions: d.sessions,
    events: d.events,
    coordinator: d.coordinator,
    node: d.node,
    owner,
    webhooks: d.webhooks,
    keySeats: d.keySeats,
    grace: d.grace,
    beats: beatCounts,
  });
  d.events.on((e) => owner.onEvent(e));
  // docs/protocol.md 12.8: the worker holding shard 0 announces expiries; every owner ends its sessions.
  const expiryWatch = new ExpiryWatch({ now, log, events: d.events, ...d.expiring, isLeader: d.isLeader });
  return {
    owner,
    gateway,
    /** Accepted beats this worker counted and has not yet added to beat_counts. */
    beatCounts,
    mount(router: Router, gate: ClientDeps): void {
      heartbeatRoutes(router, { gate, heartbeats: gateway });
    },
    /** The sweeper, the expiry watch and the beat counts' flush. */
    startTimers(): void {
      owner.startSweeper();
      expiryWatch.start();
      beatCounts.start(BEAT_FLUSH_MS);
    },
    stopWatch: () => expiryWatch.stop(),
    /** What this worker's heartbeat sessions report at scrape time. */
    gauges(metrics: Pick<Metrics, 'gauge'>): void {
      const g = (name: string, help: string, read: () => number) => metrics.gauge(name, help, read);
      g('keywarden_heartbeat_sessions', 'Heartbeat sessions hosted by this worker', () => owner.host.size);
      g(
        'keywarden_heartbeat_live_actors',
        'Heartbeat sessions kept unpacked (recently active; the rest are packed)',
        () => owner.host.unpacked,
      );
      g(
        'keywarden_heartbeat_unsettled',
        'Heartbeat sessions whose last Redis write failed without a clear answer, being written again',
        () => owner.unsettledCount,
      );
      g(
        'keywarden_heartbeat_refusals_unaudited_total',
        'Refused beats and starts answered without an audit line (at most one a minute per session is written)',
        () => gateway.refusals.unaudited,
      );
    },
  };
}
