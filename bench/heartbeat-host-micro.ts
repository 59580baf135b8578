// `npx tsx bench/heartbeat-host-micro.ts [--n=100000] [--max-live=1000] [--seconds=3]`
// CPU per beat in the heartbeat host alone (no HTTP, no signing), on the two paths a beat takes:
//   hot:  the session is kept unpacked (a few clients beating fast, as `npm run bench` does);
//   cold: the session is packed, and its beat rewrites its slot in place (a fleet: N sessions beating
//         every 30-300 s, only --max-live unpacked).
// Also the memory the host keeps per session (heap + external after forced collections, with
// --expose-gc: the script runs itself again with it). Prints one table row per path.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { HeartbeatHost } from '../src/modules/heartbeat/heartbeat-host.js';
import { hwidHash, type BeatInput } from '../src/modules/heartbeat/heartbeat.machine.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  const self = fileURLToPath(import.meta.url);
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', self, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  process.exit(r.status ?? 1);
}

const arg = (name: string, fallback: string) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const N = arg('n', '100000');
const MAX_LIVE = arg('max-live', '1000');
const SECONDS = arg('seconds', '3');

let now = 1_760_000_000_000;
const hex = (i: number, len: number) => i.toString(16).padStart(len, '0');
const token = (i: number, gen: number) => `TT${hex(gen, 8)}${hex(i, 24)}`;
// Flat strings, as the server's come from JSON.parse (a template literal would make a rope).
const flat = (s: string) => Buffer.from(s, 'latin1').toString('latin1');
const session = (i: number) => flat(`S${hex(i, 8)}${'x'.repeat(34)}`);
const uuid = (i: number) => `${hex(i, 8)}-0000-4000-8000-${hex(i * 7919, 12)}`;

function memory(): number {
  for (let i = 0; i < 4; i++) gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

const base = memory();
const host = new HeartbeatHost({ now: () => now, maxLive: MAX_LIVE });
const gens = new Uint32Array(N);
for (let i = 0; i < N; i++) {
  host.create({
    appId: '84d8862f-7a09-4f76-95d4-d8b8a15196b1',
    session: session(i),
    token: token(i, 0),
    systemId: flat(`system-${hex(i, 12)}`),
    beatInterval: 300,
    now,
    userId: null,
    licenseId: flat(uuid(i)),
    hwidHash: hwidHash(`device-${i}`),
  });
}
const perSession = (memory() - base) / N;

function beat(i: number): void {
  const g = gens[i]!;
  const b: BeatInput = {
    now,
    token: token(i, g),
    systemId: `system-${hex(i, 12)}`,
    beatIndex: g + 1,
    codeHash: '0123456789abcdef0123456789abcdef',
    codeSize: 4096,
    pinnedHash: '',
    injectionDetection: true,
    newToken: token(i, g + 1),
  };
  const r = host.send(session(i), { type: 'BEAT', beat: b });
  if (r?.verdict.kind !== 'accepted') throw new Error(`beat ${i} not accepted: ${JSON.stringify(r?.verdict)}`);
  gens[i] = g + 1;
}

function run(name: string, pick: (k: number) => number): void {
  const end = performance.now() + SECONDS * 1000;
  const cpu0 = process.cpuUsage();
  let k = 0;
  while (performance.now() < end) {
    for (let j = 0; j < 1000; j++, k++) {
      now += 1;
      beat(pick(k));
    }
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(`| ${name} | ${k.toLocaleString('en-US')} | ${(((cpu.user + cpu.system) * 1000) / k).toFixed(0)} |`);
}

const sweep0 = performance.now();
for (let i = 0; i < 10; i++) host.sweep();
const sweepMs = (performance.now() - sweep0) / 10;
console.log(
  `${N.toLocaleString('en-US')} sessions, ${MAX_LIVE} live at most: ${perSession.toFixed(0)} B per session; ` +
    `a sweep that finds nothing takes ${sweepMs.toFixed(1)} ms (once a second)`,
);
console.log('| path | beats | CPU ns per beat |');
console.log('|---|---:|---:|');
// Hot: the most recently created sessions are the live ones.
run('hot (unpacked)', (k) => N - 1 - (k % Math.min(MAX_LIVE, 500)));
// Cold: round robin over every session, so nearly every beat is of a packed one.
run('cold (packed, rewritten in place)', (k) => k % N);
host.close();
