// Every name that crosses a process, in one file: the coordinator's keys, hashes, leases, limiter
// prefixes and pub/sub channels (Redis's, or LocalCoordinator's in a single process), and MessagePack,
// the encoding of what travels under them and between workers (docs/cluster.md). Workers of two
// versions share these names during a rolling restart: a name changes here, never at its user, and
// only with a way for the old and the new one to meet. eslint.config.js lets only platform/cluster
// import msgpackr; everything else encodes with `pack`/`unpack` from here.
export { pack, unpack } from 'msgpackr';

/** Pub/sub channels: every worker subscribed gets every message. */
export const CHANNELS = {
  /** Dashboard live events (notify/events.ts). */
  events: 'events',
  /** Sign-ins revoked or changed: cached principals are dropped (access/access-signal.ts). */
  access: 'access',
  /** An application's settings or blacklist changed: caches drop it (client/client-app-cache.ts). */
  appChanged: 'app.changed',
  /** The realtime channel's control messages: kill, attach, notice (realtime/client-push.service.ts). */
  clientChannel: 'client.channel',
  /** Calls to one worker when no direct link reaches it (rpc.ts). */
  rpc: (worker: string) => `rpc:${worker}`,
} as const;

/** Prefix of client session records: a single process keeps them across a restart (LocalCoordinator). */
const SESSION_PREFIX = 'sess:';

/** Plain keys with a time to live. */
export const KEYS = {
  sessionPrefix: SESSION_PREFIX,
  /** A client session's record (client/client-sessions.ts). */
  session: (token: string) => SESSION_PREFIX + token,
  /** The key an unactivated session was given (client/unactivated-keys.ts). */
  sessionLicense: (token: string) => `sk:${token}`,
  /** Throttles the audit line of refused heartbeats of one session (heartbeat/heartbeat-refusals.ts). */
  refusalAudit: (session: string) => `hbref:a:${session}`,
  /** The secret workers authenticate their direct links with (peer-transport.ts). */
  clusterSecret: 'cluster:secret',
  /** A lease's holder and its fencing counter (redis.coordinator.ts, under its prefix). */
  lease: (name: string) => `lease:${name}`,
  fence: (name: string) => `fence:${name}`,
} as const;

/** Hashes: one field per member, session or key. */
export const HASHES = {
  /** Live workers and their addresses (membership.ts). */
  members: 'members',
  /** Floating seats of the keys of one shard (heartbeat/seats.ts). */
  seats: (shard: number) => `seats:${shard}`,
  /** Heartbeat sessions of one shard (heartbeat/heartbeat.owner.ts). */
  heartbeats: (shard: number) => `hbs:${shard}`,
} as const;

/** Leases: who owns a shard (shard-leases.ts). */
export const LEASES = {
  shard: (shard: number) => `shard:${shard}`,
} as const;

/** Key prefixes of the coordinator's rate limiters. */
export const LIMITERS = {
  /** Refused heartbeats per session and per address (heartbeat/heartbeat-refusals.ts). */
  refusalsPerSession: 'hbref:s',
  refusalsPerIp: 'hbref:ip',
  /** Sign-in lockouts (platform/limits/lockout.ts). */
  lockout: (policy: string) => `lock:${policy}`,
  /** Requests per address of one route group (platform/limits/compact-rate-limiter.ts). */
  requests: (name: string) => `rl:${name}`,
} as const;
