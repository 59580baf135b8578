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
import { Api } from '../helpers/http.js';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/process.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';

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

/** The PLAIN key the devices-and-seats test uses: 2 devices, 1 concurrent session. */
async function seatKey(h: SdkHarness, key: string): Promise<void> {
  const appId = (JSON.parse(h.env.KW_APP_IDS!) as Record<string, string>).PLAIN!;
  const api = new Api(h.env.KW_BASE_URL!, h.env.KW_OWNER_TOKEN!);
  const items = (await api.get(`/api/apps/${appId}/licenses?q=${encodeURIComponent(key.slice(-4))}`)).body.items as {
    id: string;
    key_preview: string;
  }[];
  const hit = items.find((l) => l.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`)!;
  const r = await api.patch(`/api/licenses/${hit.id}`, { max_devices: 2, max_sessions: 1 });
  if (r.status !== 200) throw new Error(`seat key: ${r.status} ${JSON.stringify(r.body)}`);
}

describe.skipIf(!hasGo)('Go SDK against the server', () => {
  let h: SdkHarness;
  let tmp: string;
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
    try {
      const built = await go(['build', './...'], { cwd: SDK_DIR, timeoutMs: 170_000 });
      if (built.code !== 0) throw new Error(`go build failed:\n${built.out}`);
      const vet = await go(['vet', './...'], { cwd: SDK_DIR, timeoutMs: 170_000 });
      if (vet.code !== 0) throw new Error(`go vet failed:\n${vet.out}`);
    } finally {
      await harness;
    }
    await seatKey(h, (h.env.KW_GO_SEAT_KEY = lastKey()));
  }, 240_000);

  afterAll(async () => {
    await h?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('passes its unit and integration tests (every vector, every tamper mode refused)', async () => {
    const env = { ...h.env, KW_REQUIRE_INTEGRATION: '1', KW_REQUIRE_VECTORS: '1' };
    const r = await go(['test', '-count=1', '-v', '-timeout', '280s', '.'], {
      cwd: SDK_DIR,
      env,
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
    ])
      passed(name);
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
});
