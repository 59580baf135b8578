// The capacity search's arithmetic: a verdict per step against the SLO, the clients held, and the
// extrapolation to a fleet (clients -> workers -> hosts) with every assumption written out.
// The search itself is the generator's step schedule (bench/gen/kwload.c --step-clients); this
// file only judges what each step measured.
import type { Counts, Step } from './generator.js';
import type { Slo } from './options.js';

export interface StepVerdict {
  step: number;
  clients: number;
  /** the step's measured seconds, since the run's start */
  from: number;
  to: number;
  /** clients with a live session at the step's end */
  held: number;
  /** accepted beats a second over the step's settled seconds */
  beatsPerSecond: number;
  /** the SLO's percentile over the settled seconds, ms */
  latencyMs: number;
  latencySamples: number;
  errors: number;
  calls: number;
  errorRate: number;
  /** server CPU over the step, cores (when /metrics was readable) */
  serverCores?: number;
  pass: boolean;
  why: string[];
  /** only the latency bound broke: worth measuring once more before the search ends on it */
  latencyOnly: boolean;
  /** why a first measurement of this step failed, when a second one was taken */
  firstTry?: string;
}

/** Failed calls of a step: refusals, lost connections, failed preparations, answers failing verification. */
export function failures(c: Counts): number {
  return c.non2xx + c.errors + c.prep_fail + c.bad_sig + c.bad_proof;
}

export function judgeStep(s: Step, slo: Slo, serverCores?: number): StepVerdict {
  const p = { 50: s.settled.p50_us, 90: s.settled.p90_us, 99: s.settled.p99_us }[slo.percentile] / 1000;
  const calls = s.all.calls + s.all.prep;
  const errors = failures(s.all);
  const errorRate = calls > 0 ? errors / calls : 0;
  const seconds = Math.max(1, s.to - s.from);
  const why: string[] = [];
  if (s.settled.calls === 0) why.push('no beat in its settled seconds (lengthen --step-duration)');
  if (p > slo.latencyMs) why.push(`p${slo.percentile} ${p.toFixed(1)} ms > ${slo.latencyMs} ms`);
  if (errorRate > slo.errorRate)
    why.push(`errors ${(errorRate * 100).toFixed(2)}% > ${(slo.errorRate * 100).toFixed(2)}%`);
  if (s.live < s.clients) why.push(`${s.live} of ${s.clients} clients held`);
  return {
    step: s.step,
    clients: s.clients,
    from: s.from,
    to: s.to,
    held: s.live,
    beatsPerSecond: s.settled.ok / seconds,
    latencyMs: p,
    latencySamples: s.settled.calls,
    errors,
    calls,
    errorRate,
    serverCores,
    pass: why.length === 0,
    why,
    latencyOnly: why.length === 1 && p > slo.latencyMs,
  };
}

export interface ExtrapolationRow {
  clients: number;
  workers: number;
  hosts: number;
}

export interface CapacityResult {
  slo: Slo;
  steps: StepVerdict[];
  /** the last step that met the SLO before the first that did not */
  held?: StepVerdict;
  broke?: StepVerdict;
  /** why the search ended */
  ended: 'slo' | 'max-clients' | 'duration' | 'max-requests' | 'signal';
  /** the interval the clients beat at in the test, and the app's (when they differ, the figures are scaled) */
  testInterval?: number;
  appInterval?: number;
  workers: number;
  cores?: number;
  perWorker?: number;
  /** at the app's interval, when the test beat at another */
  perWorkerAtAppInterval?: number;
  perCore?: number;
  workersPerHost: number;
  headroom: number;
  table: ExtrapolationRow[];
  assumptions: string[];
}

export interface CapacityContext {
  slo: Slo;
  verdicts: StepVerdict[];
  ended: CapacityResult['ended'];
  testInterval?: number;
  appInterval?: number;
  workers: number;
  cores?: number;
  hostCores?: number;
  headroom: number;
  targets: number[];
  transport: string;
  /** the generator's CPU while the server was measured on the same machine, cores */
  generatorCores?: number;
  local: boolean;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export function capacityResult(x: CapacityContext): CapacityResult {
  const firstFail = x.verdicts.findIndex((v) => !v.pass);
  const held = (firstFail < 0 ? x.verdicts : x.verdicts.slice(0, firstFail)).at(-1);
  const broke = firstFail < 0 ? undefined : x.verdicts[firstFail];
  const ended = broke ? 'slo' : x.ended;
  const perWorker = held ? held.clients / x.workers : undefined;
  const scale =
    x.testInterval && x.appInterval && x.testInterval !== x.appInterval ? x.appInterval / x.testInterval : 1;
  const perWorkerAtAppInterval = perWorker !== undefined && scale !== 1 ? perWorker * scale : undefined;
  // clients per core of server CPU in use at the held step: a linear extrapolation of CPU, meaningful when CPU is the limit
  const perCore = held?.serverCores ? (held.clients * scale) / held.serverCores : undefined;
  const workersPerHost = x.hostCores ?? x.cores ?? 4;
  const plan = (perWorkerAtAppInterval ?? perWorker ?? 0) * x.headroom;
  const table =
    plan > 0
      ? x.targets.map((clients) => {
          const workers = Math.ceil(clients / plan);
          return { clients, workers, hosts: Math.ceil(workers / workersPerHost) };
        })
      : [];
  const interval = x.appInterval ?? x.testInterval;
  const assumptions = [
    `Clients beat every ${interval ?? '?'} s over ${x.transport}, as in the test; what a worker runs out of is beats a ` +
      'second (CPU), so at another interval it holds proportionally more or fewer clients.',
    ...(scale !== 1
      ? [
          `The test beat every ${x.testInterval} s (--beat-interval) instead of the app's ${x.appInterval} s: the clients held are ` +
            `scaled by ${scale.toFixed(2)} (${fmt(perWorker ?? 0)} -> ${fmt(perWorkerAtAppInterval ?? 0)} per worker). Idle connections ` +
            'cost memory and open files, not CPU; check both at the scaled count.',
        ]
      : []),
    `One worker per core, ${workersPerHost} a host${x.hostCores ? '' : x.cores ? " (the measured deployment's cores)" : ' (assumed: give --host-cores)'}; ` +
      "N workers hold N times one worker's clients (cluster mode: each session lives on one worker; bench/README.md measured " +
      "2 workers at 1.9 x one worker's heartbeat throughput).",
    "PostgreSQL is not on a beat's path (accepted beats are counted, not written one by one); activations are, so size " +
      'it for them. In cluster mode every call reads its session record from Redis (one GET a beat): Redis carries the ' +
      "fleet's beats a second in small reads, well within one instance at these rates, but it is not free.",
    `Planned at ${Math.round(x.headroom * 100)}% of the measured capacity (--headroom), for bursts, a lost worker and GC pauses.`,
    // A run of a few minutes cannot tell a client's memory from the warm-up's growth; the bench measures it apart.
    `Memory is not the limit at these counts: bench/README.md measured about 1 KB of worker RSS per live REST session ` +
      `(at 100,000) and 3 to 5 KB per channel client (at 100,000 and 10,000), so ${fmt(plan)} clients a worker need at most ` +
      `about ${fmt((plan * 5 * 1024) / 2 ** 20)} MiB beyond its baseline.`,
    'Each channel client (and each REST client keeping its connection) holds an open file in its worker and in the proxy: ' +
      "raise LimitNOFILE and nginx's worker_connections above the clients per host.",
    ...(x.local && x.generatorCores !== undefined
      ? [
          `The generator ran on the same machine and used ${x.generatorCores.toFixed(2)} cores during the search: a deployment with ` +
            'its cores to itself holds more.',
        ]
      : []),
  ];
  return {
    slo: x.slo,
    steps: x.verdicts,
    held,
    broke,
    ended,
    testInterval: x.testInterval,
    appInterval: x.appInterval,
    workers: x.workers,
    cores: x.cores,
    perWorker,
    perWorkerAtAppInterval,
    perCore,
    workersPerHost,
    headroom: x.headroom,
    table,
    assumptions,
  };
}
