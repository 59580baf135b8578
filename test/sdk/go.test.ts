// The Go SDK (sdk/go) end to end: `go build`, `go vet` and `go test` of the module (the unit tests run
// every shared vector; the integration tests run against a real server prepared by the SDK harness,
// tamper fakes included, the licensing models on the harness's restartable second server, and a
// `keywarden serve` child process that this file restarts with SIGTERM and SIGKILL under a running
// heartbeat); then the example program, and the downloaded zip built and run as its README says.
// The module has no dependency (standard library only), so everything builds offline; GOCACHE stays
// Go's default (~/.cache/go-build), so a second run compiles nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { affinityEchoes, downloadSdkZip, startSdkHarness, type SdkHarness } from '../helpers/sdk-harness.js';
import { runCommand } from '../helpers/command.js';
import { requireToolchain } from '../helpers/toolchain.js';
import { expectUpdateRun, publishUpdate } from '../helpers/sdk-updates.js';
import { Api } from '../helpers/http.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/process.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';
import pg from 'pg';

const SDK_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sdk/go');
const hasGo = requireToolchain(
  'go (Debian: golang-go, Go 1.19 or newer)',
  (() => {
    try {
      return spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
    } catch {
      return false;
    }
  })(),
);
/** Offline and reproducible: no module proxy, no VCS stamping (the zip has no .git). */
const GO_ENV = { GOPROXY: 'off', GOFLAGS: '-buildvcs=false', GOTOOLCHAIN: 'local', CGO_ENABLED: '0' };
const go = (args: string[], o: { cwd: string; env?: Record<string, string>; timeoutMs: number }) =>
  runCommand('go', args, { ...o, env: { ...GO_ENV, ...o.env } });

/**
 * A `keywarden serve` child process on a fixed port, its own database and data directory, that the
 * Go tests restart with a signal (KW_RESTART_*), plus an app with keys and its keywarden.json.
 */
async function startRestartable(dir: string) {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(dir, 'restart-data-'));
  const env = {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    PORT: String(await freePort()),
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
  };
  let server: ServerProcess = await spawnServer(env);
  const owner = await new Api(server.base).signIn(OWNER.username, OWNER.password);
  const app = (await owner.post('/apps', { name: 'SDK RESTART' })).body;
  await owner.patch(`/apps/${app.id}`, { hwid_lock: true, heartbeat_interval: 5 });
  const keys = (await owner.post(`/apps/${app.id}/licenses`, { amount: 2, duration: 30, unit: 'days', level: 1 })).body;
  const published = (
    (await (await fetch(`${server.base}/api/client/keys`)).json()) as { keys: { kid: string; public_key: string }[] }
  ).keys;
  const config = path.join(dir, 'keywarden-restart.json');
  fs.writeFileSync(
    config,
    JSON.stringify(
      clientConfig(
        {
          name: app.name,
          apiKey: app.api_key,
          apiSecret: app.api_secret,
          version: app.version,
          requireSignature: false,
        },
        published,
        server.base,
      ),
    ),
  );
  const restarts: string[] = [];
  return {
    env: { KW_RESTART_CONFIG: config, KW_RESTART_KEYS: keys.map((k: { key: string }) => k.key).join(',') },
    restarts,
    async restart(signal: NodeJS.Signals) {
      const code = await server.stop(signal);
      restarts.push(`${signal}:${code}`);
      server = await spawnServer(env);
    },
    output: () => server.output.join('\n'),
    async close() {
      await server.stop('SIGKILL');
      await db.drop();
    },
  };
}

/**
 * What the Go tests ask of this process: POST /expire {"key", "ms"} moves a PLAIN key's expires_at
 * (in the harness server's database, as the server's own expiry tests do); POST /restart {"signal"}
 * restarts the child server and answers once it listens again.
 */
async function startControl(h: SdkHarness, restartable: Awaited<ReturnType<typeof startRestartable>>) {
  const sql = new pg.Client({ connectionString: h.server.databaseUrl });
  await sql.connect();
  const appId = (JSON.parse(h.env.KW_APP_IDS!) as Record<string, string>).PLAIN!;
  const api = new Api(h.env.KW_BASE_URL!, h.env.KW_OWNER_TOKEN!);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reply = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const act = async () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, any>;
        if (req.url === '/expire') {
          const id = await licenseId(api, appId, String(body.key));
          await sql.query('update license_keys set expires_at = $1 where id = $2', [
            new Date(Date.now() + Number(body.ms)),
            id,
          ]);
        } else if (req.url === '/restart' && (body.signal === 'SIGTERM' || body.signal === 'SIGKILL')) {
          await restartable.restart(body.signal);
        } else {
          return reply(404, { error: 'POST /expire or /restart' });
        }
        reply(200, { ok: true });
      };
      act().catch((err: Error) => reply(500, { error: err.message }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      await sql.end();
    },
  };
}

async function licenseId(api: Api, appId: string, key: string): Promise<string> {
  const items = (await api.get(`/api/apps/${appId}/licenses?q=${encodeURIComponent(key.slice(-4))}`)).body.items as {
    id: string;
    key_preview: string;
  }[];
  const hit = items.find((l) => l.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`);
  if (!hit) throw new Error(`no license ${key.slice(0, 4)}****`);
  return hit.id;
}

/** The PLAIN key the devices-and-seats test uses: 2 devices, 1 concurrent session. */
async function seatKey(h: SdkHarness, key: string): Promise<void> {
  const appId = (JSON.parse(h.env.KW_APP_IDS!) as Record<string, string>).PLAIN!;
  const api = new Api(h.env.KW_BASE_URL!, h.env.KW_OWNER_TOKEN!);
  const r = await api.patch(`/api/licenses/${await licenseId(api, appId, key)}`, { max_devices: 2, max_sessions: 1 });
  if (r.status !== 200) throw new Error(`seat key: ${r.status} ${JSON.stringify(r.body)}`);
}

describe.skipIf(!hasGo)('Go SDK against the server', () => {
  let h: SdkHarness;
  let tmp: string;
  let restartable: Awaited<ReturnType<typeof startRestartable>> | undefined;
  let control: Awaited<ReturnType<typeof startControl>> | undefined;
  const lastKey = () => {
    const keys = h.env.KW_KEYS_PLAIN!.split(',');
    const k = keys.pop()!;
    h.env.KW_KEYS_PLAIN = keys.join(',');
    return k;
  };

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-go-'));
    // The server harness starts while Go compiles (the build is a child process).
    const harness = startSdkHarness().then((started) => (h = started));
    const child = startRestartable(tmp).then((started) => (restartable = started));
    try {
      const built = await go(['build', './...'], { cwd: SDK_DIR, timeoutMs: 170_000 });
      if (built.code !== 0) throw new Error(`go build failed:\n${built.out}`);
      const vet = await go(['vet', './...'], { cwd: SDK_DIR, timeoutMs: 170_000 });
      if (vet.code !== 0) throw new Error(`go vet failed:\n${vet.out}`);
    } finally {
      await Promise.allSettled([harness, child]);
    }
    await Promise.all([harness, child]);
    await seatKey(h, (h.env.KW_GO_SEAT_KEY = lastKey()));
    control = await startControl(h, restartable!);
    Object.assign(h.env, restartable!.env, { KW_GO_CONTROL_URL: control.url });
  }, 240_000);

  afterAll(async () => {
    await control?.close();
    await restartable?.close();
    await h?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('passes its unit and integration tests (every vector, every tamper mode refused)', async () => {
    const env = { ...h.env, KW_REQUIRE_INTEGRATION: '1', KW_REQUIRE_VECTORS: '1' };
    // KW_GO_RACE=1 (needs gcc): the same run under the race detector, for work on the SDK.
    const race = process.env.KW_GO_RACE === '1' ? ['-race'] : [];
    const r = await go(['test', ...race, '-count=1', '-v', '-timeout', '280s', '.'], {
      cwd: SDK_DIR,
      env: race.length ? { ...env, CGO_ENABLED: '1' } : env,
      timeoutMs: 290_000,
    });
    if (r.code !== 0 || process.env.KW_SHOW) console.error(r.out);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^ok\s+keywarden\s/m);
    const skipped = r.out.split('\n').filter((l) => /^\s*--- SKIP/.test(l));
    expect(skipped).toEqual([]);
    const passed = (name: string) => expect(r.out).toMatch(new RegExp(`^\\s*--- PASS: ${name} \\(`, 'm'));
    for (const name of [
      'TestVectorsRequestSignatures',
      'TestVectorsResponseSignatures',
      'TestVectorsProofs',
      'TestVectorsEncryption',
      'TestVectorsErrors',
      'TestVectorsOffline',
      'TestVectorsChannel',
      'TestX25519RFC7748',
      'TestIntegrationHeartbeatThreeBeatsThenStop',
      'TestIntegrationSignedAppWithEncryptedAnswers',
      'TestIntegrationTamperBadProofStartTokenNotTrusted',
      'TestIntegrationEveryBeatTamperedIsCompromisedAfter5',
      'TestIntegrationAnOutageThenAForgottenSessionReauthenticatesOnce',
      'TestIntegrationAnOutageDuringWhichTheKeyWasBannedEndsWithBanned',
      'TestIntegrationChannelBanPushedWithinASecond',
      'TestIntegrationChannelHelloForgedIsRefusedBeatsGoOnOverREST',
      'TestIntegrationChannelPushedFrameRefused/forge',
      'TestIntegrationChannelPushedFrameRefused/swap',
      'TestIntegrationChannelInjectFromAnotherConnectionRefused',
      'TestIntegrationChannelAbsentBeatsOverREST',
      'TestIntegrationChannelDroppedThenBack',
      'TestIntegrationDevicesAndSeats',
      'TestIntegrationExpiryPushedOnTheChannel',
      'TestIntegrationExpiryOverREST',
      'TestModelsTrialOncePerDevice',
      'TestModelsOfflineFileRoundTripTamperingRefused',
      'TestModelsGraceAcrossARealServerRestart',
      'TestModelsGraceNeverCoversAnExpiry',
      'TestAirgapRequestAnsweredThroughTheDashboardCompletes',
      'TestAirgapAnAnswerToAnOlderRequestIsRefused',
      'TestAirgapASeatIsLeasedRenewedAndReleased',
      'TestAirgapTheLeaseRenewsItselfBeforeItExpires',
      'TestAirgapEverySeatTakenIsSessionLimitUntilOneIsReleased',
      'TestAirgapARelayServingAForgedPoolIsRefused',
      'TestRestartSurvived/SIGTERM',
      'TestRestartSurvived/SIGKILL',
    ])
      passed(name);
    // The restarts really happened: SIGTERM exits 0 after writing the sessions, SIGKILL is a crash.
    expect(restartable!.restarts).toEqual(['SIGTERM:0', 'SIGKILL:null']);
    expect(restartable!.output()).toMatch(/state\.restored/);
    for (const mode of ['forged', 'unsigned', 'replayed', 'foreign_nonce', 'unknown_kid', 'stale', 'bad_base64'])
      passed(`TestIntegrationTamper/${mode}`);
  }, 300_000);

  it('the example activates a key, beats three times and exits 0', async () => {
    const echoesBefore = await affinityEchoes(h.env);
    const r = await go(['run', './examples/activate', lastKey(), h.env.KW_CONFIG_PLAIN!], {
      cwd: SDK_DIR,
      timeoutMs: 120_000,
    });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/connected to SDK PLAIN \(version 1\.0\)/);
    expect(r.out).toMatch(/license ok: level 3, expires 20\d\d-/);
    expect(r.out).toMatch(/beat 3 verified \(count 3\)/);
    expect(r.out).toMatch(/heartbeat stopped/);
    // The calls after init (REST and the channel's upgrade) sent back the worker the answers named.
    const echoes = await affinityEchoes(h.env);
    expect(echoes.echoed - echoesBefore.echoed).toBeGreaterThanOrEqual(2);
    expect(echoes.reached - echoesBefore.reached).toBe(echoes.echoed - echoesBefore.echoed);
    const outdated = await go(['run', './examples/activate', 'ANY-KEY', h.env.KW_CONFIG_OUTDATED!], {
      cwd: SDK_DIR,
      timeoutMs: 120_000,
    });
    expect(outdated.code).toBe(1);
    expect(outdated.out).toMatch(/failed: update_required/);
    expect(outdated.out).toMatch(/download 2\.0 from https:\/\/example\.com\/download\/2\.0/);
  }, 240_000);

  it('finds a published update, downloads its exact bytes and refuses tampered downloads (*UpdateError)', async () => {
    // The program is its own module that uses the SDK in place (a replace directive, nothing fetched).
    const prog = path.join(tmp, 'update-program');
    fs.mkdirSync(prog);
    fs.copyFileSync(path.resolve(SDK_DIR, '../../test/sdk/programs/update.go'), path.join(prog, 'main.go'));
    fs.writeFileSync(
      path.join(prog, 'go.mod'),
      `module updateprogram\n\ngo 1.19\n\nrequire keywarden v0.0.0\n\nreplace keywarden => ${SDK_DIR}\n`,
    );
    const dir = path.join(tmp, 'update');
    fs.mkdirSync(dir);
    const u = await publishUpdate(h, tmp);
    try {
      const r = await go(['run', '.', u.config, lastKey(), 'go-update-hwid-0001', dir], {
        cwd: prog,
        env: { KW_DL_TAMPER_URLS: JSON.stringify(u.tamperUrls) },
        timeoutMs: 180_000,
      });
      expectUpdateRun(r, u, dir, 'UpdateError');
    } finally {
      await u.close();
    }
  }, 240_000);

  it('the downloaded zip builds, tests and runs its example as the README says', async () => {
    const root = await downloadSdkZip(h.env, 'go', path.join(tmp, 'zip'));
    for (const f of ['README.md', 'go.mod', 'keywarden.json', 'client.go', 'examples/activate/main.go'])
      expect(fs.existsSync(path.join(root, f)), f).toBe(true);
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).toContain('go run ./examples/activate <LICENSE-KEY>');
    // README quick start, from the unzipped folder: nothing to install, no arguments but the key.
    const r = await go(['run', './examples/activate', lastKey()], { cwd: root, timeoutMs: 120_000 });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/connected to SDK PLAIN/);
    expect(r.out).toMatch(/beat 3 verified/);
    expect(r.out).toMatch(/heartbeat stopped/);
    // Its own tests pass outside the repository (no vectors, no server: those skip).
    const vet = await go(['vet', './...'], { cwd: root, timeoutMs: 120_000 });
    expect(vet.code, vet.out).toBe(0);
    const t = await go(['test', '-count=1', './...'], {
      cwd: root,
      env: { KW_BASE_URL: '', KW_VECTORS_DIR: '', KW_REQUIRE_INTEGRATION: '', KW_REQUIRE_VECTORS: '' },
      timeoutMs: 120_000,
    });
    expect(t.code, t.out).toBe(0);
    expect(t.out).toMatch(/^ok\s+keywarden\s/m);
  }, 240_000);
});
