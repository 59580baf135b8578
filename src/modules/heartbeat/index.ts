// The heartbeat module's public surface: heartbeat sessions: the receiving gateway and the shard owner.
// Other modules and the composition root import only this file.
export { BeatCounts } from './beat-counts.js';
export { ExpiryWatch } from './expiry-watch.js';
export { beatInterval } from './beat-interval.js';
export { HeartbeatGateway } from './heartbeat.gateway.js';
export { expiryWindowMs } from './heartbeat.machine.js';
export { type HeartbeatOps, HeartbeatOwner } from './heartbeat.owner.js';
export { heartbeatRoutes } from './heartbeat.routes.js';
