// License-key actors live on the worker that owns the key's shard, like heartbeat sessions: two
// activations of one key queue on one actor instead of racing (the database arbitrates anyway,
// with conditional writes). This registers the operation on the cluster node and routes to it.
import { shardOf, type OpMap, type ShardNode } from '../../platform/cluster/cluster-node.js';
import type { LicenseHost } from './license-host.js';
import type { LicenseOp } from './license.machine.js';

export interface LicenseOps extends OpMap {
  'lic.run': { args: { licenseId: string; op: LicenseOp }; result: Record<string, unknown> };
}

/** Registers `lic.run` on the node; the returned `run` sends an operation to the key's owner. */
export function routeLicenses(node: ShardNode<LicenseOps>, host: LicenseHost): Pick<LicenseHost, 'run'> {
  node.handle('lic.run', (a) => host.run(a.licenseId, a.op));
  return {
    run: (licenseId, op) => node.route(shardOf(licenseId), 'lic.run', { licenseId, op }, () => host.run(licenseId, op)),
  };
}
