// Rolling upgrades (docs/multi-host.md "Rolling upgrades"): the cluster speaks the lowest version among
// its live members, read from their ids; a worker of a build before versions (a plain id) is the
// baseline, 1. A change every member must share waits until that figure reaches its version.
import { afterEach, expect, it } from 'vitest';
import { pino } from 'pino';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { ClusterNode } from '../../../src/platform/cluster/cluster-node.js';
import { CLUSTER_VERSION, versionOf } from '../../../src/platform/cluster/membership.js';

const log = pino({ level: 'silent' });
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('reads a version from an id; a plain id is the baseline', () => {
  expect(versionOf('3f2a7c1e-0000-4000-8000-000000000000')).toBe(1);
  expect(versionOf('v2.3f2a7c1e-0000-4000-8000-000000000000')).toBe(2);
  expect(versionOf('v17.x')).toBe(17);
});

it('a mixed cluster speaks the old version until the old worker leaves, then the new one', async () => {
  const c = new LocalCoordinator();
  cleanups.push(() => c.close());
  const fresh = new ClusterNode(c, log, Date.now);
  const old = new ClusterNode(c, log, Date.now, { version: 1 });
  cleanups.push(() => fresh.close());
  expect(fresh.id.startsWith(`v${CLUSTER_VERSION}.`)).toBe(true);
  expect(versionOf(old.id)).toBe(1);
  await fresh.start();
  expect(fresh.clusterVersion).toBe(CLUSTER_VERSION);
  await old.start();
  await fresh.tick();
  expect(fresh.memberCount).toBe(2);
  expect(fresh.clusterVersion).toBe(1);
  expect(fresh.speaks(CLUSTER_VERSION)).toBe(false);
  expect(fresh.speaks(1)).toBe(true);
  // The old worker is upgraded away: it leaves, and the cluster speaks the new version.
  await old.close();
  await fresh.tick();
  expect(fresh.memberCount).toBe(1);
  expect(fresh.clusterVersion).toBe(CLUSTER_VERSION);
  expect(fresh.speaks(CLUSTER_VERSION)).toBe(true);
});
