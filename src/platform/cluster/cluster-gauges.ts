// What a worker's cluster node reports at scrape time (GET /metrics): members, shards, how
// forwarded operations travelled, and the clock skew against the coordinator.
import type { Metrics } from '../http/metrics.js';
import type { ClusterNode } from './cluster-node.js';

type NodeCounts = Pick<
  ClusterNode,
  | 'clockSkewMs'
  | 'clusterVersion'
  | 'directCalls'
  | 'duplicateFrames'
  | 'expiredFrames'
  | 'fallbackCalls'
  | 'forwarded'
  | 'memberCount'
  | 'ownedShards'
  | 'peerLinkDowns'
  | 'peerLinksUp'
  | 'pubsubCalls'
  | 'resentCalls'
  | 'servedLocally'
>;

export function registerClusterGauges(metrics: Pick<Metrics, 'gauge'>, node: NodeCounts): void {
  const g = (name: string, help: string, read: () => number) => metrics.gauge(name, help, read);
  g('keywarden_cluster_members', 'Live workers this worker sees', () => node.memberCount);
  g('keywarden_cluster_owned_shards', 'Shards whose lease this worker holds', () => node.ownedShards);
  g('keywarden_cluster_forwarded_total', 'Actor operations sent to the owning worker', () => node.forwarded);
  g(
    'keywarden_cluster_direct_total',
    'Forwarded operations sent over a direct connection to the owning worker',
    () => node.directCalls,
  );
  g(
    'keywarden_cluster_pubsub_total',
    "Forwarded operations sent through Redis pub/sub (the owner's address unknown or unreachable)",
    () => node.pubsubCalls,
  );
  g('keywarden_cluster_local_total', 'Actor operations run on this worker', () => node.servedLocally);
  g('keywarden_cluster_peer_links_up', 'Direct links to other workers working now', () => node.peerLinksUp);
  g(
    'keywarden_cluster_peer_link_down_total',
    'Direct links declared down (a ping unanswered for CLUSTER_PEER_TIMEOUT_MS, or the connection closed)',
    () => node.peerLinkDowns,
  );
  g(
    'keywarden_cluster_fallback_total',
    'Forwarded operations re-sent through Redis pub/sub because their direct link went down',
    () => node.fallbackCalls,
  );
  g(
    'keywarden_cluster_expired_frames_total',
    'Operations from other workers dropped unrun: they arrived after their deadline (the caller had answered)',
    () => node.expiredFrames,
  );
  g(
    'keywarden_cluster_duplicate_frames_total',
    'Second copies of a forwarded operation (after a fallback, or published again) answered without running it again',
    () => node.duplicateFrames,
  );
  g(
    'keywarden_cluster_resent_total',
    'Forwarded operations published again through Redis pub/sub while awaited (pub/sub may lose a message)',
    () => node.resentCalls,
  );
  g(
    'keywarden_cluster_version',
    'The cluster protocol version every live member speaks (the lowest announced; rolling upgrades)',
    () => node.clusterVersion,
  );
  g(
    'keywarden_cluster_clock_skew_ms',
    "This host's clock minus the coordinator's (Redis TIME), ms; over 1000 is reported in /readyz",
    () => node.clockSkewMs,
  );
}
