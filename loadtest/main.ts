// `keywarden loadtest` (src/cli.ts hands the command to this file) and `npm run loadtest --`:
// drives a running deployment (or the quick-start server it starts itself) with the native
// generator (bench/gen/kwload.c), shows the run live, optionally searches for the clients it
// holds under an SLO, and writes a report (Markdown, JSON, HTML with charts) under
// loadtest-results/. docs/loadtest.md is the user's page.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { machine } from '../bench/lib.js';
import { capacityResult, judgeStep, type StepVerdict } from './capacity.js';
import { plan, prepareGenerator, startGenerator, writeKeysFile, type GenResult, type Tick } from './generator.js';
import { LiveView } from './live-view.js';
import { parseOptions, UsageError, USAGE, type Options } from './options.js';
import { writeReport, type Report } from './report.js';
import { ServerMetrics } from './server-metrics.js';
import { resolveTarget, type Target } from './target.js';

/** Exit codes: 0 done; 1 the run failed; 2 a usage error; 3 answers failed verification. */
const EXIT = { ok: 0, failed: 1, usage: 2, verify: 3 } as const;
const SECRET_OPTIONS = /^--(api-secret|token)=/;

function commandLine(argv: string[]): string {
  const shown = argv.map((a, i) =>
    SECRET_OPTIONS.test(a) ? a.replace(/=.*/, '=***') : /^--(api-secret|token)$/.test(argv[i - 1] ?? '') ? '***' : a,
  );
  return ['keywarden loadtest', ...shown].join(' ');
}

function transportOf(o: Options): string {
  if (o.channelShare === 0) return 'REST';
  if (o.channelShare === 1) return 'the realtime channel';
  return `the channel (${Math.round(o.channelShare * 100)}% of clients) and REST`;
}

/** What the report's readers should know about this run, in plain words. */
function notesOf(o: Options, t: Target, r: GenResult, metrics: ServerMetrics, genErrors: string[]): string[] {
  const notes: string[] = [];
  const c = r.total;
  if (genErrors.some((l) => l.includes('Invalid request signature'))) {
    notes.push(
      'Answers said 401 "Invalid request signature": the app requires signed requests; give --api-secret (or a token, ' +
        'which lets the tool read it).',
    );
  }
  if (c.limited > 0) {
    notes.push(
      `${c.limited} answers were 429 (rate limit): a deployment limits init to 30 and license to 20 calls a minute per client ` +
        'address. The generator gives every client its own address in X-Forwarded-For, which the deployment believes only from ' +
        "TRUSTED_PROXIES: add this machine's address there for the test (docs/loadtest.md).",
    );
  }
  if (c.shed > 0)
    notes.push(
      `${c.shed} answers were 503 (load shed: a bounded table such as CLIENT_SESSION_LIMIT was full, or PostgreSQL was unreachable).`,
    );
  if (c.bad_sig + c.bad_proof > 0) {
    notes.push(
      `**${c.bad_sig + c.bad_proof} answers failed verification** (${c.bad_sig} signatures or channel MACs, ${c.bad_proof} heartbeat ` +
        'proofs): an SDK would refuse them. A proxy that alters answers, or a deployment signing with another key than ' +
        `${t.publicKey ? `kid ${t.publicKey.kid} ${o.publicKey ? '(pinned with --public-key)' : '(from GET /api/client/keys)'}` : 'the pinned one'}.`,
    );
  }
  if (c.dead > 0) notes.push(`${c.dead} clients gave up after four failed attempts to prepare their session.`);
  if (c.errors > 0)
    notes.push(`${c.errors} calls were lost with their connection (reset or closed by the server or a proxy).`);
  if (metrics.unavailable) notes.push(`Server CPU was not measured: ${metrics.unavailable}.`);
  if (t.local) {
    notes.push(
      `The quick-start server (one worker, embedded PostgreSQL) and the generator shared this machine; the generator ` +
        `used ${(r.cpu_total_s / Math.max(1, r.duration_s)).toFixed(2)} cores on average.`,
    );
  }
  if (r.stopped === 'max-requests')
    notes.push(`The run stopped at --max-requests=${o.maxRequests} before its duration.`);
  if (r.stopped === 'signal' && !o.capacity) notes.push('The run was stopped early (signal).');
  return notes;
}

async function run(argv: string[]): Promise<number> {
  let o: Options;
  try {
    o = parseOptions(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`keywarden loadtest: ${err.message}\n(keywarden loadtest --help lists every option)`);
    return EXIT.usage;
  }
  if (o.help) {
    console.log(USAGE);
    return EXIT.ok;
  }
  const say = (m: string) => process.stderr.write(`${m}\n`);
  const runId = randomBytes(4).toString('hex');
  const started = new Date();
  if (o.url) say(`keywarden loadtest: measuring ${o.url.origin}. Run it only against deployments you own.`);
  const target = await resolveTarget(o, runId, say);
  let stopping = false;
  let abandon = () => {};
  const onSignal = () => {
    if (stopping) return abandon();
    stopping = true;
    say('stopping: the report follows (again to abandon it)');
    stopGen();
  };
  let stopGen = () => {};
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const bin = prepareGenerator(o, target);
    const keys = writeKeysFile(target.keys);
    const p = plan(o, target, keys.file);
    const view = new LiveView(
      { title: `loadtest ${o.scenario}${o.capacity ? ' (capacity)' : ''}`, duration: o.duration },
      o.live,
    );
    view.say(`${p.describe}; ${target.keysNote}`);
    const t0 = Date.now();
    const metrics = new ServerMetrics(target.http, t0);
    metrics.start();
    const ticks: Tick[] = [];
    const verdicts: StepVerdict[] = [];
    const genErrors: string[] = [];
    const firstTries = new Map<number, StepVerdict>();
    const gen = startGenerator(bin, p, {
      tick: (t) => {
        ticks.push(t);
        view.update(t, metrics.last);
      },
      step: (s) => {
        if (!o.capacity) return;
        const v = judgeStep(s, o.capacity.slo, metrics.cpuBetween(s.from, s.to));
        const first = firstTries.get(v.step);
        if (first) v.firstTry = first.why.join('; ');
        const line =
          `step ${v.step + 1}: ${v.clients} clients, p${o.capacity.slo.percentile} ${v.latencyMs.toFixed(1)} ms, ` +
          `errors ${(v.errorRate * 100).toFixed(2)}%`;
        // A tail bound broken once may be a GC pause or a neighbour's burst: the step is measured again
        // before the search ends on it. Errors and clients not held are not noise.
        if (!v.pass && v.latencyOnly && !first) {
          firstTries.set(v.step, v);
          view.say(`${line}: over the bound, measuring these clients once more`);
          gen.decide('again');
          return;
        }
        verdicts.push(v);
        view.say(`${line}: ${v.pass ? 'SLO met' : `SLO broken (${v.why.join('; ')})`}`);
        if (v.pass) return gen.decide('next');
        stopping = true; // the search is over: the report comes from what was measured
        gen.decide('stop');
      },
      stderr: (line) => {
        if (genErrors.length < 50) genErrors.push(line);
        view.say(line);
      },
    });
    stopGen = gen.stop;
    abandon = () => {
      gen.stop();
      void target.release(say).finally(() => process.exit(EXIT.failed));
    };
    let result: GenResult;
    try {
      result = await gen.done;
    } finally {
      metrics.stop();
      view.end();
      keys.remove();
    }

    const testInterval = p.beatInterval ?? target.app.interval;
    let capacity: Report['capacity'];
    if (o.capacity) {
      capacity = capacityResult({
        slo: o.capacity.slo,
        verdicts,
        ended: result.stopped,
        testInterval,
        appInterval: target.app.interval,
        workers: target.workers ?? Math.max(1, metrics.last?.workers ?? 1),
        cores: target.cores,
        hostCores: o.hostCores,
        headroom: o.headroom,
        targets: o.targets,
        transport: transportOf(o),
        generatorCores: result.cpu_total_s / Math.max(1, result.duration_s),
        local: Boolean(target.local),
      });
    }
    const report: Report = {
      tool: 'keywarden loadtest',
      started_at: started.toISOString(),
      finished_at: new Date().toISOString(),
      machine: machine(),
      target: {
        url: target.origin.origin,
        self_started: Boolean(target.local),
        workers: target.workers,
        cores: target.cores,
      },
      scenario: o.scenario,
      plan: p.describe,
      command: commandLine(argv),
      app: { api_key: target.app.apiKey, beat_interval: target.app.interval, test_beat_interval: p.beatInterval },
      keys: target.keysNote,
      result,
      verify: {
        share: o.verify,
        checked: result.total.verified,
        bad_signatures: result.total.bad_sig,
        bad_proofs: result.total.bad_proof,
        kid: target.publicKey?.kid,
      },
      spike:
        o.scenario === 'spike'
          ? {
              at: o.spikeAt!,
              dropped: result.spike_dropped,
              recovered: result.spike_recovered,
              p50_ms: result.spike_p50_us / 1000,
              p99_ms: result.spike_p99_us / 1000,
              max_ms: result.spike_max_us / 1000,
            }
          : undefined,
      capacity,
      ticks,
      server: metrics.samples,
      server_note: metrics.unavailable,
      notes: notesOf(o, target, result, metrics, genErrors),
    };
    const files = writeReport(report, path.resolve(o.out));
    const t = result.total;
    console.log(
      `${o.scenario}: ${result.ok_rps.toFixed(1)} accepted calls/s after the ramp, p50 ${(result.p50_us / 1000).toFixed(1)} ms, ` +
        `p99 ${(result.p99_us / 1000).toFixed(1)} ms; ${t.non2xx + t.errors + t.prep_fail} of ${t.calls + t.prep} calls failed; ` +
        `${t.verified} answers verified, ${t.bad_sig + t.bad_proof} failed verification`,
    );
    if (capacity?.held)
      console.log(`capacity: ${capacity.held.clients} clients held (${Math.round(capacity.perWorker!)} per worker)`);
    for (const n of report.notes.filter((x) => x.startsWith('**') || x.includes('429')))
      console.log(`note: ${n.replace(/\*\*/g, '')}`);
    const shown = (f: string) =>
      path.relative(process.cwd(), f).startsWith('..') ? f : path.relative(process.cwd(), f);
    console.log(`report: ${shown(files.md)}\n        ${shown(files.html)}\n        ${shown(files.json)}`);
    if (t.bad_sig + t.bad_proof > 0) return EXIT.verify;
    if (t.ok + t.prep_ok === 0) {
      console.error('keywarden loadtest: no call succeeded: is the URL, the api key or the certificate right?');
      return EXIT.failed;
    }
    return EXIT.ok;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await target.release(say);
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`keywarden loadtest: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(EXIT.failed);
  },
);
