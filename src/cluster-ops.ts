// The operations one worker asks another to run (on the owner of a shard), with their argument
// and result types: the cluster layer routes them, this layer declares them (dependencies point
// inward). Only plain data crosses: msgpack frames.
import type { OpMap } from './platform/cluster/cluster-node.js';
import type { LicenseOp } from './modules/activation/license.machine.js';
import type { BeatArgs, BeatOutcome, StartArgs, StopArgs, StopOutcome } from './modules/heartbeat/heartbeat.service.js';

export interface ClusterOps extends OpMap {
  'hb.start': { args: StartArgs; result: { ok: true } };
  'hb.beat': { args: BeatArgs; result: BeatOutcome };
  'hb.stop': { args: StopArgs; result: StopOutcome };
  /** Ends one session as revoked (a revocation pushed on the realtime channel); how many ended. */
  'hb.kill': { args: { session: string }; result: number };
  'lic.run': { args: { licenseId: string; op: LicenseOp }; result: Record<string, unknown> };
}
