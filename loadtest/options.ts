// `keywarden loadtest` options: parsed and checked before anything starts, so a mistake is one
// clear line (exit 2), never a half-started run. docs/loadtest.md is the reference.
import { parseArgs } from 'node:util';

export const SCENARIOS = ['activate', 'heartbeat', 'channel', 'mix', 'spike'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export class UsageError extends Error {}

export interface Slo {
  /** the latency percentile the SLO bounds: 50, 90 or 99 */
  percentile: 50 | 90 | 99;
  latencyMs: number;
  /** failed calls over all calls, as a fraction (0.001 = 0.1%) */
  errorRate: number;
  text: string;
}

export interface Capacity {
  slo: Slo;
  start: number;
  step: number;
  stepSeconds: number;
  maxClients: number;
}

export interface Options {
  duration: number;
  scenario: Scenario;
  url?: URL;
  apiKey?: string;
  apiSecret?: string;
  clients: number;
  rate?: number;
  channelShare: number;
  ramp?: number;
  beatInterval?: number;
  spikeAt?: number;
  token?: string;
  username?: string;
  passwordStdin: boolean;
  keysFile?: string;
  keys?: number;
  cleanup: boolean;
  verify: number;
  publicKey?: string;
  kid?: string;
  ca?: string;
  insecure: boolean;
  encKey?: string;
  capacity?: Capacity;
  workers?: number;
  cores?: number;
  hostCores?: number;
  headroom: number;
  targets: number[];
  maxRequests: number;
  out: string;
  live: boolean;
  genThreads: number;
  help: boolean;
}

/** Longest run the tool starts: a longer test is several runs, each with its own report. */
export const MAX_DURATION_S = 3600;
/** Connections one generator process holds at most (this machine's open-files limit is 20,000). */
export const MAX_CLIENTS = 19_000;

export const USAGE = `usage: keywarden loadtest --duration=SECONDS [options]     (npm run loadtest -- --duration=30)

Without --url it starts the quick-start server itself (embedded PostgreSQL, an owner, an app).
Run it only against deployments you own.

  --duration=S            required: how long the run lasts (at most ${MAX_DURATION_S})
  --scenario=NAME         mix (default), activate, heartbeat, channel, spike
  --url=URL               a running deployment (http:// or https://, through its reverse proxy)
  --api-key=K             the application under test (with --url)
  --api-secret=S          its secret, when the app requires signed requests
  --clients=N             fleet size (default 200; activate: connections, default 8)
  --rate=R                calls per second over all clients (default: each beats at the app's interval)
  --channel-share=F       mix and spike: share of clients on the realtime channel (default 0.5)
  --ramp=S                clients join over S seconds (default min(10, duration/3))
  --beat-interval=S       beat every S seconds instead of the app's interval (a what-if)
  --spike-at=S            spike: when every client drops and reconnects (default duration/3)
keys for the test clients (with --url):
  --token=T               a dashboard bearer token: the tool creates keys (and --cleanup deletes them)
  --username=U --password-stdin   sign in to the dashboard to get such a token
  --keys-file=F           existing keys, one a line (without a token)
  --keys=N                keys to create (default min(clients, 1000)); clients share them round-robin
  --cleanup               delete the keys the tool created when the run ends
checks:
  --verify=F              share of answers checked as an SDK would (signature, proofs; default 0.01)
  --public-key=B64        the response-signing key to pin (default: GET /api/client/keys)
  --kid=K                 its kid (default: the first one listed)
  --ca=FILE | --insecure  TLS: a private CA's certificate, or no certificate check
  --enc-key=K             clients open their sessions with this enc_key (answers stay unencrypted)
capacity search:
  --find-capacity         raise the clients step by step until the SLO breaks
  --slo=p99=50ms,errors=0.1%   the SLO (p50, p90 or p99; ms, s or us; errors in % or as a fraction)
  --start=N --step=N      first step's clients and the increment (default 100 and 100)
  --step-duration=S       seconds per step (default max(6, 2 x beat interval))
  --max-clients=N         stop raising here (default ${MAX_CLIENTS})
  --workers=N --cores=N   what the deployment runs (self-started: 1 worker, this machine's cores)
  --host-cores=N          cores per host in the extrapolation (default --cores)
  --headroom=F            plan at this share of the measured capacity (default 0.7)
  --target=N,N            clients to extrapolate to (default 10000,100000,1000000)
output:
  --max-requests=N        stop after this many calls (default 1000000)
  --out=DIR               where reports go (default loadtest-results)
  --no-live               a line every 5 seconds instead of the live table
  --gen-threads=N         generator threads (default 2)`;

function num(name: string, raw: string | undefined, min: number, max: number, integer = false): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw.replace(/_/g, ''));
  if (raw.trim() === '' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new UsageError(
      `--${name} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got "${raw}"`,
    );
  }
  return v;
}

/** `p99=50ms,errors=0.1%` */
export function parseSlo(text: string): Slo {
  let percentile: Slo['percentile'] | undefined;
  let latencyMs: number | undefined;
  let errorRate: number | undefined;
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [k, v] = part.split('=').map((x) => x?.trim());
    const lat = /^p(50|90|99)$/.exec(k ?? '');
    if (lat && v) {
      const m = /^(\d+(?:\.\d+)?)\s*(us|ms|s)$/.exec(v);
      if (!m) throw new UsageError(`--slo: "${part}": a latency needs a unit (us, ms or s), e.g. p99=50ms`);
      percentile = Number(lat[1]) as Slo['percentile'];
      latencyMs = Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2] as 'us' | 'ms' | 's'];
    } else if (k === 'errors' && v) {
      const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(v);
      if (!m) throw new UsageError(`--slo: "${part}": errors is a share, e.g. errors=0.1% or errors=0.001`);
      errorRate = m[2] ? Number(m[1]) / 100 : Number(m[1]);
      if (errorRate > 1) throw new UsageError(`--slo: "${part}": errors above 100%`);
    } else {
      throw new UsageError(`--slo: "${part}" is not p50=, p90=, p99= or errors=`);
    }
  }
  if (percentile === undefined || latencyMs === undefined)
    throw new UsageError('--slo needs a latency bound, e.g. p99=50ms');
  return { percentile, latencyMs, errorRate: errorRate ?? 0.001, text };
}

export function parseOptions(argv: string[]): Options {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        duration: { type: 'string' },
        scenario: { type: 'string' },
        url: { type: 'string' },
        'api-key': { type: 'string' },
        'api-secret': { type: 'string' },
        clients: { type: 'string' },
        rate: { type: 'string' },
        'channel-share': { type: 'string' },
        ramp: { type: 'string' },
        'beat-interval': { type: 'string' },
        'spike-at': { type: 'string' },
        token: { type: 'string' },
        username: { type: 'string' },
        'password-stdin': { type: 'boolean' },
        'keys-file': { type: 'string' },
        keys: { type: 'string' },
        cleanup: { type: 'boolean' },
        verify: { type: 'string' },
        'public-key': { type: 'string' },
        kid: { type: 'string' },
        ca: { type: 'string' },
        insecure: { type: 'boolean' },
        'enc-key': { type: 'string' },
        'find-capacity': { type: 'boolean' },
        slo: { type: 'string' },
        start: { type: 'string' },
        step: { type: 'string' },
        'step-duration': { type: 'string' },
        'max-clients': { type: 'string' },
        workers: { type: 'string' },
        cores: { type: 'string' },
        'host-cores': { type: 'string' },
        headroom: { type: 'string' },
        target: { type: 'string' },
        'max-requests': { type: 'string' },
        out: { type: 'string' },
        'no-live': { type: 'boolean' },
        'gen-threads': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const s = (k: string) => values[k] as string | undefined;
  const b = (k: string) => values[k] === true;
  if (b('help')) return { help: true } as Options;
  if (s('duration') === undefined) {
    throw new UsageError('--duration=SECONDS is required: every run is bounded, and says so (e.g. --duration=30)');
  }
  const duration = num('duration', s('duration'), 1, MAX_DURATION_S)!;
  const scenario = (s('scenario') ?? 'mix') as Scenario;
  if (!SCENARIOS.includes(scenario))
    throw new UsageError(`--scenario must be one of ${SCENARIOS.join(', ')}, got "${scenario}"`);
  let url: URL | undefined;
  if (s('url') !== undefined) {
    try {
      url = new URL(s('url')!);
    } catch {
      throw new UsageError(`--url must be an absolute http:// or https:// URL, got "${s('url')}"`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new UsageError(`--url must be http:// or https://, got "${url.protocol}"`);
    if (url.pathname !== '/' || url.search)
      throw new UsageError("--url is the deployment's origin (scheme, host, port), without a path");
    if (!s('api-key')) throw new UsageError('--url needs --api-key (the application under test)');
  }
  if (!url && (s('api-key') || s('token') || s('username') || s('keys-file'))) {
    throw new UsageError('--api-key, --token, --username and --keys-file describe a deployment: give its --url too');
  }
  if (s('username') && !b('password-stdin'))
    throw new UsageError('--username needs --password-stdin (the password is read from stdin)');
  if (b('password-stdin') && !s('username')) throw new UsageError('--password-stdin needs --username');
  if (s('token') && s('username')) throw new UsageError('give --token or --username, not both');
  if (url && !s('token') && !s('username') && !s('keys-file')) {
    throw new UsageError(
      'keys for the test clients: give --keys-file (one key a line), or a dashboard --token (or --username ' +
        'with --password-stdin) so the tool creates them',
    );
  }
  if (b('cleanup') && !s('token') && !s('username') && url)
    throw new UsageError('--cleanup deletes keys the tool created: it needs --token or --username');
  const capacity = b('find-capacity');
  if (!capacity && (s('slo') || s('step') || s('start') || s('step-duration') || s('max-clients'))) {
    throw new UsageError('--slo, --start, --step, --step-duration and --max-clients belong to --find-capacity');
  }
  if (capacity && scenario !== 'mix' && scenario !== 'heartbeat' && scenario !== 'channel') {
    throw new UsageError('--find-capacity raises a fleet: use it with --scenario=mix (default), heartbeat or channel');
  }
  if (s('spike-at') && scenario !== 'spike') throw new UsageError('--spike-at belongs to --scenario=spike');
  if (capacity && s('rate'))
    throw new UsageError(
      '--find-capacity raises clients at their beat interval: --rate (a shared rate) does not apply',
    );
  if (scenario === 'activate' && (s('beat-interval') || s('channel-share'))) {
    throw new UsageError('--beat-interval and --channel-share describe a fleet that beats: not --scenario=activate');
  }
  if (b('insecure') && s('ca')) throw new UsageError('give --ca or --insecure, not both');
  if (s('enc-key') !== undefined && !/^[A-Za-z0-9_-]{1,35}$/.test(s('enc-key')!)) {
    throw new UsageError('--enc-key: 1 to 35 characters of [A-Za-z0-9_-]');
  }
  const clients = num('clients', s('clients'), 1, MAX_CLIENTS, true) ?? (scenario === 'activate' ? 8 : 200);
  const maxClients = num('max-clients', s('max-clients'), 1, MAX_CLIENTS, true) ?? MAX_CLIENTS;
  const step = num('step', s('step'), 1, MAX_CLIENTS, true) ?? 100;
  const targets = (s('target') ?? '10000,100000,1000000').split(',').map((t) => num('target', t, 1, 1e12, true)!);
  const spikeAt =
    num('spike-at', s('spike-at'), 1, duration - 1) ??
    (scenario === 'spike' ? Math.max(1, Math.round(duration / 3)) : undefined);
  return {
    duration,
    scenario,
    url,
    apiKey: s('api-key'),
    apiSecret: s('api-secret'),
    clients,
    rate: num('rate', s('rate'), 0.1, 1e6),
    channelShare:
      num('channel-share', s('channel-share'), 0, 1) ??
      (scenario === 'channel' ? 1 : scenario === 'heartbeat' ? 0 : 0.5),
    ramp: num('ramp', s('ramp'), 0, MAX_DURATION_S),
    beatInterval: num('beat-interval', s('beat-interval'), 0.05, 3600),
    spikeAt,
    token: s('token'),
    username: s('username'),
    passwordStdin: b('password-stdin'),
    keysFile: s('keys-file'),
    keys: num('keys', s('keys'), 1, 100_000, true),
    cleanup: b('cleanup'),
    verify: num('verify', s('verify'), 0, 1) ?? 0.01,
    publicKey: s('public-key'),
    kid: s('kid'),
    ca: s('ca'),
    insecure: b('insecure'),
    encKey: s('enc-key'),
    capacity: capacity
      ? {
          slo: parseSlo(s('slo') ?? 'p99=50ms,errors=0.1%'),
          start: num('start', s('start'), 1, MAX_CLIENTS, true) ?? step,
          step,
          stepSeconds: num('step-duration', s('step-duration'), 2, MAX_DURATION_S, true) ?? 0,
          maxClients,
        }
      : undefined,
    workers: num('workers', s('workers'), 1, 10_000, true),
    cores: num('cores', s('cores'), 1, 100_000, true),
    hostCores: num('host-cores', s('host-cores'), 1, 100_000, true),
    headroom: num('headroom', s('headroom'), 0.05, 1) ?? 0.7,
    targets,
    maxRequests: num('max-requests', s('max-requests'), 1, 1e12, true) ?? 1_000_000,
    out: s('out') ?? 'loadtest-results',
    live: !b('no-live'),
    genThreads: num('gen-threads', s('gen-threads'), 1, 64, true) ?? 2,
    help: false,
  };
}
