// The relay's rows (docs/air-gapped.md "Performance"): lease renewals per second with the relay on one
// core (target 10,000/s), and its resident memory holding 10,000 leases. The relay is the compiled
// `dist/src/relay-cli.js`, pinned to CPU 0 with taskset when there is one; its pool is signed here with
// a key of the bench's own (the relay needs no service: it checks the pool under the key it is given).
// The load comes from this process: keep-alive connections, one request in flight each, raw HTTP/1.1.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, signingKeyFromSeed } from '../src/platform/crypto/index.js';
import { signPool } from '../src/modules/airgap/pool-file.js';
import { relayId } from '../src/modules/airgap/relay/relay-id.js';
import { progress, rssBytes, type Row } from './lib.js';

const LEASES = 10_000;
const CONNS = 64;

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** One keep-alive connection sending one request at a time; resolves each answer's status and body. */
class Conn {
  private buf: Buffer = Buffer.alloc(0);
  private waiting: ((r: { status: number; body: Buffer }) => void) | undefined;
  private constructor(private readonly s: net.Socket) {
    s.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.drain();
    });
    // uWS closes a connection idle for 10 s: a request must never wait on a closed one.
    s.on('close', () => this.waiting?.({ status: 0, body: Buffer.alloc(0) }));
  }
  static open(port: number): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(new Conn(s)));
      s.setNoDelay(true);
      s.once('error', reject);
    });
  }
  private drain(): void {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buf.subarray(0, end).toString('latin1');
    const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (this.buf.length < end + 4 + len) return;
    const body = this.buf.subarray(end + 4, end + 4 + len);
    this.buf = this.buf.subarray(end + 4 + len);
    const w = this.waiting;
    this.waiting = undefined;
    w?.({ status: Number(head.slice(9, 12)), body });
  }
  send(req: string): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.s.write(req);
    });
  }
  close(): void {
    this.s.destroy();
  }
}

const post = (hwid: string) => {
  const body = JSON.stringify({ hwid });
  return `POST /relay/v1/leases HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
};
const put = (id: string) => `PUT /relay/v1/leases/${id} HTTP/1.1\r\nHost: relay\r\nContent-Length: 0\r\n\r\n`;

export async function relayRows(o: { serverEntry: string; durationS: number; warmupS: number }): Promise<Row[]> {
  const entry = path.join(path.dirname(o.serverEntry), 'relay-cli.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-bench-relay-'));
  try {
    const key = signingKeyFromSeed(randomBytes(32));
    const now = Date.now();
    const pool = signPool('bench', key.secretKey, {
      app_id: 'bench',
      license_id: 'bench',
      relay_id: relayId(),
      seats: LEASES,
      level: 1,
      entitlements: [],
      expires_at: null,
      valid_until: new Date(now + 86_400_000).toISOString(),
      issued_at: new Date(now).toISOString(),
    });
    fs.writeFileSync(path.join(dir, 'pool'), pool);
    const pinned = spawnSync('taskset', ['--version']).status === 0;
    const argv = [
      ...(pinned ? ['taskset', '-c', '0'] : []),
      process.execPath,
      entry,
      '--pool',
      path.join(dir, 'pool'),
      '--public-key',
      key.publicKey.toString('base64'),
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--data',
      path.join(dir, 'data'),
    ];
    const t0 = Date.now();
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /"port":(\d+)[^\n]*"msg":"relay.listening"/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`relay exited (${code}): ${out}`)));
    });
    const startMs = Date.now() - t0;
    const pid = child.pid!;
    try {
      const idle = rssBytes(pid);
      const conns = await Promise.all(Array.from({ length: CONNS }, () => Conn.open(port)));
      progress(`relay: listening after ${startMs} ms; taking ${LEASES} leases`);
      const ids: string[] = [];
      let taken = 0;
      await Promise.all(
        conns.map(async (c) => {
          while (taken < LEASES) {
            const r = await c.send(post(`bench-hwid-${String(taken++).padStart(8, '0')}`));
            if (r.status !== 201) throw new Error(`lease refused: ${r.status} ${r.body.toString()}`);
            ids.push((JSON.parse(r.body.toString()) as { lease_id: string }).lease_id);
          }
        }),
      );
      const held = rssBytes(pid);
      progress(`relay: ${LEASES} leases held; renewing for ${o.durationS} s after ${o.warmupS} s`);
      let phase: 'warm' | 'measure' | 'done' = 'warm';
      let ok = 0;
      let other = 0;
      const lat: number[] = [];
      let next = 0;
      const loops = conns.map(async (c) => {
        while (phase !== 'done') {
          const id = ids[next++ % ids.length]!;
          const t = process.hrtime.bigint();
          const { status } = await c.send(put(id));
          if (status === 0) throw new Error('the relay closed a connection');
          if (phase !== 'measure') continue;
          if (status === 200) ok++;
          else other++;
          if ((ok & 15) === 0) lat.push(Number(process.hrtime.bigint() - t) / 1e6);
        }
      });
      await new Promise((r) => setTimeout(r, o.warmupS * 1000));
      phase = 'measure';
      const cpu0 = cpuSeconds(pid);
      const w0 = process.hrtime.bigint();
      await new Promise((r) => setTimeout(r, o.durationS * 1000));
      const window = Number(process.hrtime.bigint() - w0) / 1e9;
      const cpu = cpuSeconds(pid) - cpu0;
      const counted = ok;
      phase = 'done';
      await Promise.all(loops);
      for (const c of conns) c.close();
      lat.sort((a, b) => a - b);
      const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
      const note =
        `relay ${pinned ? 'pinned to CPU 0' : 'not pinned (no taskset)'}, ${CONNS} connections, ` +
        `${LEASES} leases renewed round-robin, each renewal journaled; started in ${startMs} ms` +
        (other ? `; **INVALID: ${other} non-200**` : '');
      return [
        {
          id: 'relay',
          workload: '(h) relay lease renewals, one core',
          system: 'keywarden',
          rps: counted / window,
          p50_ms: q(0.5),
          p99_ms: q(0.99),
          cpu_ms_per_1k: (cpu * 1000 * 1000) / Math.max(1, counted),
          cores: { relay: cpu / window },
          non2xx: other,
          note,
        },
        {
          id: 'relaymem',
          workload: `(h) relay memory at ${LEASES} leases`,
          system: 'keywarden',
          value: held / 1024 / 1024,
          unit: 'MB RSS',
          note: `${(idle / 1024 / 1024).toFixed(1)} MB idle; ${(((held - idle) / LEASES) | 0).toLocaleString()} bytes per lease`,
        },
      ];
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
