// `keywarden loadtest` end to end: the real command (loadtest/main.ts, the native generator it
// builds) against real servers. Every scenario for a few seconds through the shipped nginx
// configuration with a self-signed certificate (TLS); the verify mode catching a proxy that flips
// one byte of every answer, and a pinned key that is not the deployment's; the capacity search
// converging on a server limited to a known number of clients (CLIENT_SESSION_LIMIT with clients
// that open their sessions with an enc_key); and the newcomer's run with no --url at all. What is
// asserted are counts from the report, never timings.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../helpers/server.js';
import { requireToolchain } from '../helpers/toolchain.js';
import {
  freePort,
  nginxAvailable,
  opensslAvailable,
  renderSite,
  selfSignedCert,
  startNginx,
  type Nginx,
} from '../deploy/nginx-harness.js';

const root = path.resolve(import.meta.dirname, '../..');
const ready =
  requireToolchain('nginx (Debian package nginx)', nginxAvailable()) &&
  requireToolchain('openssl (the test certificate)', opensslAvailable()) &&
  requireToolchain('cc (the load generator)', spawnSync('cc', ['--version']).status === 0) &&
  requireToolchain('libssl-dev (TLS in the load generator)', fs.existsSync('/usr/include/openssl/ssl.h')) &&
  requireToolchain(
    'libsodium-dev (channel and verify mode in the load generator)',
    fs.existsSync('/usr/include/sodium.h'),
  );

interface Counts {
  calls: number;
  ok: number;
  non2xx: number;
  errors: number;
  prep: number;
  prep_ok: number;
  prep_fail: number;
  verified: number;
  bad_sig: number;
  bad_proof: number;
  activations: number;
  rest_calls: number;
  ws_calls: number;
  dead: number;
}
interface Report {
  target: { url: string; self_started: boolean };
  result: { total: Counts; spike_dropped: number; spike_recovered: number; clients_end: number };
  verify: { checked: number; bad_signatures: number; bad_proofs: number };
  capacity?: {
    held?: { clients: number };
    broke?: { clients: number; why: string[] };
    steps: { clients: number; pass: boolean }[];
  };
  ticks: unknown[];
  keys: string;
}
interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  report?: Report;
  html?: string;
}

/** Runs the command as a user would, its report written to a directory of its own. */
function loadtest(args: string[], stdin?: string, entry = ['loadtest/main.ts']): Promise<Run> {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-lt-report-'));
  const child = spawn(process.execPath, ['--import', 'tsx', ...entry, ...args, `--out=${out}`, '--no-live'], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(stdin ?? '');
  const guard = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(guard);
      const files = fs.readdirSync(out);
      const json = files.find((f) => f.endsWith('.json'));
      const html = files.find((f) => f.endsWith('.html'));
      const run: Run = {
        code,
        stdout,
        stderr,
        report: json ? (JSON.parse(fs.readFileSync(path.join(out, json), 'utf8')) as Report) : undefined,
        html: html ? fs.readFileSync(path.join(out, html), 'utf8') : undefined,
      };
      fs.rmSync(out, { recursive: true, force: true });
      resolve(run);
    }),
  );
}

const failures = (c: Counts) => c.non2xx + c.errors + c.prep_fail + c.bad_sig + c.bad_proof;
const why = (r: Run) => `exit ${r.code}\n${r.stdout}\n${r.stderr.slice(-3000)}`;

/** A plain HTTP proxy that flips one byte (the case of the first key's first letter) in every client answer it forwards. */
async function byteFlipper(upstream: string): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(upstream);
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
        (ur) => {
          const body: Buffer[] = [];
          ur.on('data', (c: Buffer) => body.push(c));
          ur.on('end', () => {
            const b = Buffer.concat(body);
            // {"success": ...} -> {"Success": ...}: the chain's fields stay intact; dashboard answers pass unchanged
            if (req.url!.startsWith('/api/client/') && b.length > 2) b[2]! ^= 0x20;
            const headers = { ...ur.headers };
            delete headers['transfer-encoding'];
            res.writeHead(ur.statusCode ?? 502, { ...headers, 'content-length': String(b.length) });
            res.end(b);
          });
        },
      );
      up.on('error', () => res.destroy());
      up.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe.skipIf(!ready)('keywarden loadtest', () => {
  let t: TestServer;
  let nginx: Nginx;
  let tmp: string;
  let tlsUrl: string;
  let caFile: string;
  let owner: Api;
  let app: { id: string; api_key: string };

  beforeAll(async () => {
    // The server believes X-Forwarded-For from 127.0.0.1: nginx's hop, and the generator's own
    // addresses for its clients behind it (each simulated client is its own address).
    t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-lt-'));
    const cert = selfSignedCert(tmp);
    caFile = cert.cert;
    const tlsPort = await freePort();
    nginx = await startNginx(
      renderSite({ upstreamPort: t.server.port, tlsPort, httpPort: await freePort(), cert: cert.cert, key: cert.key }),
      tlsPort,
    );
    tlsUrl = `https://127.0.0.1:${tlsPort}`;
    owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    app = (await owner.post('/api/apps', { name: 'Load tested' })).body;
  });
  afterAll(async () => {
    await nginx?.stop();
    await t?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const keyCount = async () => (await owner.get(`/api/apps/${app.id}/stats`)).body.keys.total as number;
  const viaTls = () => [`--url=${tlsUrl}`, `--ca=${caFile}`, `--api-key=${app.api_key}`, '--verify=1'];

  it('refuses to start a run without --duration, through `keywarden loadtest` itself', async () => {
    const r = await loadtest([`--url=${t.base}`, `--api-key=${app.api_key}`, `--token=${owner.token}`], undefined, [
      'src/cli.ts',
      'loadtest',
    ]);
    expect(r.code, why(r)).toBe(2);
    expect(r.stderr).toContain('--duration=SECONDS is required');
    expect(r.report).toBeUndefined();
  });

  it('activate: init and license on keys it created, through nginx and TLS; --cleanup deletes them', async () => {
    const before = await keyCount();
    const r = await loadtest([
      ...viaTls(),
      `--token=${owner.token}`,
      '--cleanup',
      '--scenario=activate',
      '--clients=4',
      '--rate=10',
      '--duration=3',
    ]);
    expect(r.code, why(r)).toBe(0);
    const c = r.report!.result.total;
    expect(c.activations).toBeGreaterThan(0);
    expect(c.calls).toBeGreaterThanOrEqual(2 * c.activations);
    expect(failures(c), why(r)).toBe(0);
    expect(r.report!.verify.checked).toBeGreaterThan(0);
    expect(r.report!.target.url).toBe(tlsUrl);
    expect(await keyCount()).toBe(before);
    expect(r.html).toContain('<svg');
  });

  it('heartbeat: REST beats from a keys file, every answer verified', async () => {
    const keys = (await owner.post(`/api/apps/${app.id}/licenses`, { amount: 6, unit: 'lifetime' })).body.map(
      (k: { key: string }) => k.key,
    );
    const file = path.join(tmp, 'keys.txt');
    fs.writeFileSync(file, `${keys.join('\n')}\n`);
    const r = await loadtest([
      ...viaTls(),
      `--keys-file=${file}`,
      '--scenario=heartbeat',
      '--clients=6',
      '--ramp=0.5',
      '--beat-interval=0.5',
      '--duration=3',
    ]);
    expect(r.code, why(r)).toBe(0);
    const c = r.report!.result.total;
    expect(c.rest_calls).toBeGreaterThan(0);
    expect(c.ws_calls).toBe(0);
    expect(c.ok).toBe(c.calls);
    expect(failures(c), why(r)).toBe(0);
    expect(r.report!.verify.checked).toBe(c.calls + c.prep);
    expect(r.report!.verify.bad_signatures + r.report!.verify.bad_proofs).toBe(0);
  });

  it('channel: beats over the realtime channel, signed in with --username and --password-stdin', async () => {
    const r = await loadtest(
      [
        ...viaTls(),
        `--username=${OWNER.username}`,
        '--password-stdin',
        '--scenario=channel',
        '--clients=6',
        '--ramp=0.5',
        '--beat-interval=0.5',
        '--duration=3',
      ],
      OWNER.password,
    );
    expect(r.code, why(r)).toBe(0);
    const c = r.report!.result.total;
    expect(c.ws_calls).toBeGreaterThan(0);
    expect(c.rest_calls).toBe(0);
    expect(failures(c), why(r)).toBe(0);
    expect(r.report!.verify.checked).toBeGreaterThan(c.calls); // replies, the hellos and the HTTP preparations
    expect(r.report!.verify.bad_signatures).toBe(0);
  });

  it('mix: a fleet on both transports in the chosen proportion, signing its requests for an app that requires it', async () => {
    const signed = (await owner.post('/api/apps', { name: 'Signed requests' })).body;
    expect((await owner.patch(`/api/apps/${signed.id}`, { require_signature: true })).status).toBe(200);
    // the token lets the tool read the app's api_secret; REST calls and channel upgrades are signed with it
    const r = await loadtest([
      `--url=${tlsUrl}`,
      `--ca=${caFile}`,
      `--api-key=${signed.api_key}`,
      '--verify=1',
      `--token=${owner.token}`,
      '--cleanup',
      '--scenario=mix',
      '--channel-share=0.5',
      '--clients=8',
      '--ramp=0.5',
      '--beat-interval=0.5',
      '--duration=3',
    ]);
    expect(r.code, why(r)).toBe(0);
    const c = r.report!.result.total;
    expect(c.rest_calls).toBeGreaterThan(0);
    expect(c.ws_calls).toBeGreaterThan(0);
    expect(r.report!.result.clients_end).toBe(8);
    expect(failures(c), why(r)).toBe(0);
    expect(r.report!.ticks.length).toBeGreaterThanOrEqual(3);
  });

  it('spike: every client drops at once and comes back with a new session', async () => {
    const r = await loadtest([
      ...viaTls(),
      `--token=${owner.token}`,
      '--cleanup',
      '--scenario=spike',
      '--clients=8',
      '--ramp=0.5',
      '--beat-interval=0.5',
      '--spike-at=1.5',
      '--duration=4',
    ]);
    expect(r.code, why(r)).toBe(0);
    const g = r.report!.result;
    expect(g.spike_dropped).toBe(8);
    expect(g.spike_recovered).toBe(8);
    expect(g.total.prep_ok).toBeGreaterThanOrEqual(2 * 8 * 3); // each client prepared its session twice (init, license, start at least)
    expect(failures(g.total), why(r)).toBe(0);
  });

  it("verify mode: catches a proxy that flips one byte of each answer, and a pinned key that is not the deployment's", async () => {
    const flipper = await byteFlipper(t.base);
    try {
      const flipped = await loadtest([
        `--url=${flipper.url}`,
        `--api-key=${app.api_key}`,
        `--token=${owner.token}`,
        '--cleanup',
        '--scenario=heartbeat',
        '--clients=3',
        '--ramp=0.5',
        '--beat-interval=0.5',
        '--duration=3',
        '--verify=1',
        `--public-key=${(await owner.get('/api/client/keys')).body.keys[0].public_key}`,
      ]);
      expect(flipped.code, why(flipped)).toBe(3);
      const v = flipped.report!.verify;
      expect(v.checked).toBeGreaterThan(0);
      expect(v.bad_signatures).toBe(v.checked); // every answer was altered
      expect(flipped.report!.result.total.calls).toBeGreaterThan(0); // the chain went on: counted, not acted on
      expect(flipped.stdout).toContain('failed verification');
    } finally {
      await flipper.close();
    }
    const wrongKey = await loadtest([
      `--url=${t.base}`,
      `--api-key=${app.api_key}`,
      `--token=${owner.token}`,
      '--cleanup',
      '--scenario=activate',
      '--clients=2',
      '--rate=4',
      '--duration=2',
      '--verify=1',
      `--public-key=${randomBytes(32).toString('base64')}`,
    ]);
    expect(wrongKey.code, why(wrongKey)).toBe(3);
    expect(wrongKey.report!.verify.bad_signatures).toBe(wrongKey.report!.verify.checked);
  });

  it('capacity search: converges on the number of clients a limited server holds, within one step', async () => {
    const LIMIT = 35;
    const STEP = 10;
    // One worker that keeps at most LIMIT sessions opened with an enc_key: client LIMIT + 1 is refused (503).
    const limited = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', CLIENT_SESSION_LIMIT: String(LIMIT) });
    try {
      const api = await new Api(limited.base).signIn(OWNER.username, OWNER.password);
      const a = (await api.post('/api/apps', { name: 'Limited' })).body;
      const r = await loadtest([
        `--url=${limited.base}`,
        `--api-key=${a.api_key}`,
        `--token=${api.token}`,
        '--scenario=heartbeat',
        '--find-capacity',
        '--slo=p99=5s,errors=0.1%',
        `--start=${STEP}`,
        `--step=${STEP}`,
        '--step-duration=2',
        '--beat-interval=1',
        '--enc-key=loadtestkey0001',
        '--max-clients=100',
        '--duration=40',
        '--verify=0',
      ]);
      expect(r.code, why(r)).toBe(0);
      const cap = r.report!.capacity!;
      expect(cap.held, why(r)).toBeDefined();
      expect(cap.held!.clients).toBeGreaterThan(LIMIT - STEP);
      expect(cap.held!.clients).toBeLessThanOrEqual(LIMIT);
      expect(cap.broke!.clients).toBeGreaterThan(LIMIT);
      expect(cap.steps.filter((s) => s.pass).map((s) => s.clients)).toEqual([10, 20, 30]);
      expect(r.stdout).toContain(`capacity: ${cap.held!.clients} clients held`);
      expect(r.html).toContain('Capacity search');
    } finally {
      await limited.close();
    }
  });

  it('without --url: starts the quick-start server itself and measures it', async () => {
    const r = await loadtest(['--duration=4', '--clients=10', '--ramp=0.5', '--beat-interval=0.5']);
    expect(r.code, why(r)).toBe(0);
    expect(r.report!.target.self_started).toBe(true);
    expect(r.report!.result.total.ok).toBeGreaterThan(0);
    expect(failures(r.report!.result.total), why(r)).toBe(0);
    expect(r.stderr).toContain('starting the quick-start server');
  });
});
