// The load test's pure parts: what the command refuses before anything starts, the SLO's syntax,
// and the capacity arithmetic (which step is held, the scaling to the app's interval, the
// extrapolation to workers and hosts). The runs themselves are in test/e2e/loadtest.test.ts.
import { describe, expect, it } from 'vitest';
import { capacityResult, judgeStep, type StepVerdict } from '../../loadtest/capacity.js';
import type { Counts, Step } from '../../loadtest/generator.js';
import { parseOptions, parseSlo, UsageError } from '../../loadtest/options.js';

const refusal = (argv: string[]) => {
  try {
    parseOptions(argv);
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  return undefined;
};

describe('keywarden loadtest options', () => {
  it('refuses a run without --duration, and out-of-range or contradictory options, with one line each', () => {
    expect(refusal([])).toMatch(/--duration=SECONDS is required/);
    expect(refusal(['--duration=0'])).toMatch(/--duration must be a number from 1 to 3600/);
    expect(refusal(['--duration=7200'])).toMatch(/from 1 to 3600/);
    expect(refusal(['--duration=10', '--scenario=flood'])).toMatch(/--scenario must be one of/);
    expect(refusal(['--duration=10', '--url=https://x.example'])).toMatch(/--url needs --api-key/);
    expect(refusal(['--duration=10', '--url=ftp://x.example', '--api-key=k'])).toMatch(/http:\/\/ or https:\/\//);
    expect(refusal(['--duration=10', '--url=https://x.example/app', '--api-key=k'])).toMatch(/without a path/);
    expect(refusal(['--duration=10', '--url=https://x.example', '--api-key=k'])).toMatch(/--keys-file .* --token/);
    expect(refusal(['--duration=10', '--api-key=k'])).toMatch(/give its --url too/);
    expect(refusal(['--duration=10', '--url=https://x.example', '--api-key=k', '--keys-file=f', '--cleanup'])).toMatch(
      /--cleanup/,
    );
    expect(refusal(['--duration=10', '--slo=p99=5ms'])).toMatch(/belong to --find-capacity/);
    expect(refusal(['--duration=10', '--find-capacity', '--scenario=spike'])).toMatch(/raises a fleet/);
    expect(refusal(['--duration=10', '--find-capacity', '--rate=100'])).toMatch(/--rate .* does not apply/);
    expect(refusal(['--duration=10', '--scenario=activate', '--beat-interval=1'])).toMatch(/not --scenario=activate/);
    expect(refusal(['--duration=10', '--clients=20000'])).toMatch(/--clients must be an integer from 1 to 19000/);
    expect(refusal(['--duration=10', '--bogus'])).toMatch(/bogus/);
    expect(refusal(['--duration=10'])).toBeUndefined();
  });

  it('defaults: the mix scenario, 200 clients, half on the channel, 1% of answers verified', () => {
    const o = parseOptions(['--duration=30']);
    expect(o).toMatchObject({ scenario: 'mix', clients: 200, channelShare: 0.5, verify: 0.01, maxRequests: 1_000_000 });
    expect(parseOptions(['--duration=30', '--scenario=activate']).clients).toBe(8);
    expect(parseOptions(['--duration=30', '--scenario=channel']).channelShare).toBe(1);
    expect(parseOptions(['--duration=30', '--scenario=spike']).spikeAt).toBe(10);
  });

  it('reads an SLO: a percentile with a unit, errors as a percentage or a fraction', () => {
    expect(parseSlo('p99=50ms,errors=0.1%')).toMatchObject({ percentile: 99, latencyMs: 50, errorRate: 0.001 });
    expect(parseSlo('p90=0.2s,errors=0.02')).toMatchObject({ percentile: 90, latencyMs: 200, errorRate: 0.02 });
    expect(parseSlo('p50=800us')).toMatchObject({ percentile: 50, latencyMs: 0.8, errorRate: 0.001 });
    expect(() => parseSlo('p99=50')).toThrow(/needs a unit/);
    expect(() => parseSlo('p95=50ms')).toThrow(/not p50=, p90=, p99= or errors=/);
    expect(() => parseSlo('errors=1%')).toThrow(/needs a latency bound/);
    expect(() => parseSlo('p99=5ms,errors=200%')).toThrow(/above 100%/);
  });
});

const counts = (over: Partial<Counts> = {}): Counts => ({
  calls: 0,
  ok: 0,
  non2xx: 0,
  shed: 0,
  limited: 0,
  errors: 0,
  reconnects: 0,
  prep: 0,
  prep_ok: 0,
  prep_fail: 0,
  dead: 0,
  verified: 0,
  bad_sig: 0,
  bad_proof: 0,
  activations: 0,
  rest_calls: 0,
  ws_calls: 0,
  p50_us: 0,
  p90_us: 0,
  p99_us: 0,
  max_us: 0,
  rest_p99_us: 0,
  ws_p99_us: 0,
  prep_p50_us: 0,
  prep_p99_us: 0,
  ...over,
});

function step(n: number, clients: number, p99Ms: number, failed = 0, live = clients): Step {
  const beats = clients * 4;
  return {
    step: n,
    clients,
    live,
    started: n * 6,
    from: n * 6 + 2,
    to: n * 6 + 6,
    settled: counts({ calls: beats, ok: beats, p99_us: p99Ms * 1000 }),
    all: counts({
      calls: beats + clients,
      ok: beats + clients - failed,
      non2xx: failed,
      prep: 3 * clients,
      prep_ok: 3 * clients,
    }),
  };
}

describe('capacity arithmetic', () => {
  const slo = parseSlo('p99=50ms,errors=0.1%');

  it('judges a step by its percentile, its failed calls and the clients it holds', () => {
    expect(judgeStep(step(0, 100, 20), slo)).toMatchObject({ pass: true, beatsPerSecond: 100, latencyOnly: false });
    expect(judgeStep(step(0, 100, 80), slo)).toMatchObject({
      pass: false,
      latencyOnly: true,
      why: ['p99 80.0 ms > 50 ms'],
    });
    const failing = judgeStep(step(0, 100, 20, 5, 95), slo);
    expect(failing).toMatchObject({ pass: false, latencyOnly: false });
    expect(failing.why).toEqual(['errors 0.63% > 0.10%', '95 of 100 clients held']); // 5 of 800 calls (beats and preparations)
  });

  it("holds the last step before the first that broke, scales it to the app's interval and extrapolates with headroom", () => {
    const verdicts: StepVerdict[] = [step(0, 1000, 10), step(1, 2000, 20), step(2, 3000, 90), step(3, 4000, 30)].map(
      (s) => judgeStep(s, slo, 0.5),
    );
    const r = capacityResult({
      slo,
      verdicts,
      ended: 'signal',
      testInterval: 1,
      appInterval: 5,
      workers: 2,
      cores: 4,
      headroom: 0.5,
      targets: [100_000, 1_000_000],
      transport: 'REST',
      local: false,
    });
    expect(r.held?.clients).toBe(2000); // step 4 met the SLO again, but the search ended at step 3
    expect(r.broke?.clients).toBe(3000);
    expect(r.ended).toBe('slo');
    expect(r.perWorker).toBe(1000);
    expect(r.perWorkerAtAppInterval).toBe(5000);
    expect(r.perCore).toBe(20_000); // 2,000 clients x 5 over half a core of server CPU
    // 2,500 clients a worker planned; 4 workers a host (the deployment's cores)
    expect(r.table).toEqual([
      { clients: 100_000, workers: 40, hosts: 10 },
      { clients: 1_000_000, workers: 400, hosts: 100 },
    ]);
    expect(r.assumptions.join('\n')).toMatch(/scaled by 5.00/);
  });

  it('says so when the first step already broke, and extrapolates nothing', () => {
    const r = capacityResult({
      slo,
      verdicts: [judgeStep(step(0, 1000, 90), slo)],
      ended: 'signal',
      workers: 1,
      headroom: 0.7,
      targets: [10_000],
      transport: 'REST',
      local: true,
    });
    expect(r.held).toBeUndefined();
    expect(r.table).toEqual([]);
  });
});
