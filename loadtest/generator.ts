// The native generator (bench/gen/kwload.c) as the load test drives it: the arguments of each
// scenario, and its output lines (a tick every second, a line per capacity step, the result) as
// events. The generator does the timing; Node only watches.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildKwload, channelCapable, tlsCapable } from '../bench/lib.js';
import type { Options } from './options.js';
import type { Target } from './target.js';

/** Counters of one second, one step or the whole run (bench/gen/kwload.c print_counts). Latencies in µs. */
export interface Counts {
  calls: number;
  ok: number;
  non2xx: number;
  shed: number;
  limited: number;
  errors: number;
  reconnects: number;
  prep: number;
  prep_ok: number;
  prep_fail: number;
  dead: number;
  verified: number;
  bad_sig: number;
  bad_proof: number;
  activations: number;
  rest_calls: number;
  ws_calls: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
  rest_p99_us: number;
  ws_p99_us: number;
  prep_p50_us: number;
  prep_p99_us: number;
}

export interface Tick extends Counts {
  t: number;
  /** clients with a prepared session at the end of the second */
  clients: number;
  /** clients the ramp or step allowed */
  target: number;
}

export interface Step {
  step: number;
  clients: number;
  live: number;
  /** when the step began adding clients, and its measured seconds (from..to), seconds since the start */
  started: number;
  from: number;
  to: number;
  /** the step's seconds after its new clients settled: latency */
  settled: Counts;
  /** the whole step: failures of the clients it added count too */
  all: Counts;
}

export interface GenResult {
  mode: string;
  conns: number;
  duration_s: number;
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  dead_conns: number;
  ok_rps: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  p999_us: number;
  max_us: number;
  cpu_total_s: number;
  stopped: 'duration' | 'max-requests' | 'max-clients' | 'signal';
  clients_end: number;
  spike_dropped: number;
  spike_recovered: number;
  spike_p50_us: number;
  spike_p99_us: number;
  spike_max_us: number;
  total: Counts;
}

export interface Plan {
  args: string[];
  /** clients (connections) the generator opens at most */
  clients: number;
  /** the beat interval the clients use, when not the one the server answers */
  beatInterval?: number;
  ramp: number;
  stepSeconds?: number;
  settle?: number;
  describe: string;
}

/** The scenario as generator arguments (docs/loadtest.md "Scenarios"). */
export function plan(o: Options, t: Target, keysFile: string): Plan {
  const u = t.origin;
  const tls = u.protocol === 'https:';
  const port = Number(u.port || (tls ? 443 : 80));
  const args = [
    '--host',
    u.hostname.replace(/^\[|\]$/g, ''),
    '--port',
    String(port),
    '--host-header',
    u.host,
    '--api-key',
    t.app.apiKey,
    '--license-file',
    keysFile,
    '--hwid',
    'loadtest-device',
    '--hwid-per-key',
    '--threads',
    String(o.genThreads),
    '--ticks',
    '--max-requests',
    String(o.maxRequests),
    // each client's own address in X-Forwarded-For, from a range unlikely to be anyone's real clients
    '--ip-base',
    String(Math.floor(Math.random() * 200) << 16),
  ];
  if (tls) args.push('--tls', ...(o.ca ? ['--ca', o.ca] : []), ...(o.insecure ? ['--insecure'] : []));
  if (t.app.apiSecret) args.push('--api-secret', t.app.apiSecret);
  if (o.encKey) args.push('--enc-key', o.encKey);
  if (o.verify > 0 && t.publicKey)
    args.push('--verify', String(o.verify), '--public-key', t.publicKey.key, '--kid', t.publicKey.kid);
  const interval = o.beatInterval ?? t.app.interval;

  if (o.scenario === 'activate') {
    const rate = o.rate ?? 20;
    const ramp = o.ramp ?? 0;
    args.push(
      '--mode',
      'activate',
      '--conns',
      String(o.clients),
      '--rate',
      String(rate),
      '--duration',
      String(o.duration),
      '--warmup',
      String(ramp),
      '--ramp',
      String(ramp),
    );
    return {
      args,
      clients: o.clients,
      ramp,
      describe: `${o.clients} connections activating (init, then license) at ${rate} a second`,
    };
  }
  args.push('--mode', 'fleet', '--ws-share', String(o.channelShare));
  if (o.rate) args.push('--rate', String(o.rate));
  else if (o.beatInterval) args.push('--beat-interval', String(o.beatInterval));
  const transport =
    o.channelShare === 0
      ? 'REST'
      : o.channelShare === 1
        ? 'the channel'
        : `the channel (${Math.round(o.channelShare * 100)}%) or REST`;
  const pace = o.rate ? `${o.rate} beats a second in all` : interval ? `every ${interval} s` : "at the app's interval";
  if (o.capacity) {
    const c = o.capacity;
    const every = interval ?? 30;
    const stepSeconds = c.stepSeconds || Math.max(6, Math.ceil(2 * every));
    // A step's new clients join over one interval (so their beats spread over it, as a real fleet's do);
    // once all are prepared and one more interval has passed, the rest of the step is measured.
    const settle = Math.max(1, Math.min(Math.ceil(every), Math.floor(stepSeconds / 2)));
    const clients = c.maxClients;
    args.push(
      '--conns',
      String(clients),
      '--start-clients',
      String(c.start),
      '--step-clients',
      String(c.step),
      '--step-seconds',
      String(stepSeconds),
      '--settle',
      String(settle),
      '--ramp',
      String(settle),
      '--duration',
      String(o.duration),
      '--warmup',
      '0',
      '--step-control',
    );
    return {
      args,
      clients,
      beatInterval: o.beatInterval,
      ramp: settle,
      stepSeconds,
      settle,
      describe: `capacity search: ${c.start} clients, then ${c.step} more every ${stepSeconds} s, beating over ${transport} ${pace}`,
    };
  }
  const ramp = o.ramp ?? Math.min(10, Math.round(o.duration / 3));
  args.push(
    '--conns',
    String(o.clients),
    '--duration',
    String(o.duration),
    '--warmup',
    String(ramp),
    '--ramp',
    String(ramp),
  );
  let describe = `${o.clients} clients joining over ${ramp} s, beating over ${transport} ${pace}`;
  if (o.scenario === 'spike') {
    args.push('--spike-at', String(o.spikeAt));
    describe += `; at ${o.spikeAt} s every client drops and reconnects at once`;
  }
  return { args, clients: o.clients, beatInterval: o.beatInterval, ramp, describe };
}

/** Checks the generator can do what the run needs, and builds it. */
export function prepareGenerator(o: Options, t: Target): string {
  if (t.origin.protocol === 'https:' && !tlsCapable()) {
    throw new Error('an https:// deployment needs the generator built with OpenSSL: apt-get install libssl-dev');
  }
  const needsSodium = o.channelShare > 0 && o.scenario !== 'activate';
  if ((needsSodium || o.verify > 0 || t.app.apiSecret) && !channelCapable()) {
    throw new Error(
      'the realtime channel, --verify and signed requests need libsodium in the generator: apt-get install libsodium-dev ' +
        '(or --channel-share=0 --verify=0)',
    );
  }
  const hard = openFilesLimit();
  const clients = o.capacity ? o.capacity.maxClients : o.clients;
  if (hard !== undefined && clients + 64 > hard) {
    throw new Error(
      `${clients} clients need as many open connections, and this machine lets one process hold ${hard} (ulimit -n): ` +
        `use at most ${hard - 64} clients${o.capacity ? ' (--max-clients)' : ''}`,
    );
  }
  return buildKwload();
}

/** The hard limit of open files (the generator raises its soft limit to it), from /proc on Linux. */
function openFilesLimit(): number | undefined {
  try {
    const m = /^Max open files\s+\S+\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export interface Running {
  done: Promise<GenResult>;
  /** ends the run early; the generator still prints its result */
  stop(): void;
  /** a capacity step's outcome (--step-control): add the next clients, measure these again, or stop */
  decide(what: 'next' | 'again' | 'stop'): void;
}

export function startGenerator(
  bin: string,
  p: Plan,
  on: { tick: (t: Tick) => void; step: (s: Step) => void; stderr: (line: string) => void },
): Running {
  const child = spawn(bin, p.args, { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin!.on('error', () => undefined); // the generator may have ended; its exit is reported below
  let result: GenResult | undefined;
  let errText = '';
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.startsWith('KWLOAD tick ')) on.tick(JSON.parse(line.slice(12)) as Tick);
      else if (line.startsWith('KWLOAD step ')) on.step(JSON.parse(line.slice(12)) as Step);
      else if (line.startsWith('KWLOAD {')) result = JSON.parse(line.slice(7)) as GenResult;
    }
  });
  let ebuf = '';
  child.stderr!.on('data', (d: Buffer) => {
    errText += d.toString();
    ebuf += d.toString();
    for (let i = ebuf.indexOf('\n'); i >= 0; i = ebuf.indexOf('\n')) {
      on.stderr(ebuf.slice(0, i));
      ebuf = ebuf.slice(i + 1);
    }
  });
  const done = new Promise<GenResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0 && result) resolve(result);
      else
        reject(
          new Error(
            `the load generator failed (${signal ?? `exit ${code}`}): ${errText.trim().split('\n').slice(-3).join(' / ')}`,
          ),
        );
    });
  });
  return {
    done,
    stop: () => void child.kill('SIGTERM'),
    decide: (what) => void (child.stdin!.writable && child.stdin!.write(`${what}\n`)),
  };
}

/** The keys as a file for --license-file (a list of thousands is too long for one argument). */
export function writeKeysFile(keys: string[]): { file: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-loadtest-keys-'));
  const file = path.join(dir, 'keys.txt');
  fs.writeFileSync(file, `${keys.join('\n')}\n`, { mode: 0o600 });
  return { file, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
