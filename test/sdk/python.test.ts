// The Python SDK (sdk/python) end to end: its unittest suite (vectors, hostile answers, and the
// integration tests against a real server prepared by the SDK harness, tamper fakes included),
// the example program, an offline wheel build installed outside the repository, and the
// downloaded zip used as its README says. Runs with Debian's /usr/bin/python3, which has
// python3-cryptography (a pyenv python on PATH usually does not).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { affinityEchoes, downloadSdkZip, startSdkHarness, type SdkHarness } from '../helpers/sdk-harness.js';
import { requireToolchain } from '../helpers/toolchain.js';
import { expectExpiredOnTime, runExpiryWatch } from '../helpers/sdk-expiry.js';
import { expectUpdateRun, publishUpdate, type PublishedUpdate } from '../helpers/sdk-updates.js';

const PYTHON = '/usr/bin/python3';
const SDK_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sdk/python');
const works = (args: string[]) => {
  try {
    return spawnSync(PYTHON, args, { stdio: 'ignore' }).status === 0;
  } catch {
    return false;
  }
};
const hasPython = requireToolchain(
  'python3-cryptography (Debian /usr/bin/python3 with `import cryptography`)',
  works(['-c', 'import cryptography']),
);
// The wheel check needs pip and setuptools >= 61 (Debian: python3-pip, python3-setuptools).
const hasPackaging =
  hasPython &&
  requireToolchain(
    'python3-pip + python3-setuptools (offline wheel build of sdk/python)',
    works(['-c', 'import setuptools, pip, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)']),
  );

// The venv install needs the venv module with ensurepip (Debian: python3-venv).
const hasVenv =
  hasPackaging && requireToolchain('python3-venv (python3 -m venv with pip)', works(['-c', 'import venv, ensurepip']));

/** Never writes __pycache__ into the repository; never lets a user site-packages leak in. */
const PY_ENV = { PYTHONDONTWRITEBYTECODE: '1', PYTHONNOUSERSITE: '1', PYTHONUNBUFFERED: '1' };

interface Run {
  code: number | null;
  out: string;
}
/** Asynchronously: the server runs in this process and must keep answering while the child runs. */
function run(args: string[], o: { cwd: string; env?: Record<string, string>; timeoutMs: number }): Promise<Run> {
  return runExe(PYTHON, args, o);
}
/** Another executable (a venv's python or pip), with the same environment rules. */
function runExe(
  exe: string,
  args: string[],
  o: { cwd: string; env?: Record<string, string>; timeoutMs: number },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(exe, args, { cwd: o.cwd, env: { ...process.env, ...PY_ENV, ...o.env } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** Copies the SDK source (what a vendor would copy) without caches and build outputs. */
function copySdk(to: string): void {
  fs.cpSync(SDK_DIR, to, {
    recursive: true,
    filter: (src) =>
      !/(__pycache__|\.egg-info|[/\\]build|[/\\]dist|\.pyc)$/.test(src) && path.basename(src) !== 'keywarden.json',
  });
}

describe.skipIf(!hasPython)('Python SDK against the server', () => {
  let h: SdkHarness;
  let tmp: string;
  // The unittest integration tests take keys from the front; the runs below take them from the end.
  const lastKey = () => {
    const keys = h.env.KW_KEYS_PLAIN!.split(',');
    const k = keys.pop()!;
    h.env.KW_KEYS_PLAIN = keys.join(',');
    return k;
  };

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-py-'));
    h = await startSdkHarness();
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('passes its unit and integration tests (every tamper mode refused)', async () => {
    const env = { ...h.env, KW_REQUIRE_INTEGRATION: '1', KW_REQUIRE_VECTORS: '1' };
    const r = await run(['-m', 'unittest', 'discover', '-s', 'sdk/python/tests', '-v'], {
      cwd: path.dirname(path.dirname(SDK_DIR)),
      env,
      timeoutMs: 280_000,
    });
    if (r.code !== 0 || process.env.KW_SHOW) console.error(r.out);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^OK(?: \(skipped=\d+\))?$/m); // what was skipped is checked below
    // Nothing skipped but a platform check that cannot apply here, and the docs/protocol.md 12 tests while the
    // server side of the licensing models is pending (KW_REQUIRE_MODELS=1: they must run).
    const skipped = r.out.split('\n').filter((l) => / \.\.\. skipped /.test(l));
    const pending =
      process.env.KW_REQUIRE_MODELS === '1' ? [] : skipped.filter((l) => l.includes('licensing models pending'));
    expect(skipped.filter((l) => !l.includes('Linux with /etc/machine-id') && !pending.includes(l))).toEqual([]);
    if (pending.length === 0) {
      for (const name of [
        'test_a_trial_once_per_device',
        'test_an_offline_file_round_trip',
        'test_grace_across_a_real_server_restart_inside_and_past_the_window',
      ]) {
        expect(r.out).toMatch(new RegExp(`^${name} \\(test_integration_models\\.Models.*\\) \\.\\.\\. ok$`, 'm'));
      }
    }
    // Air-gapped machines (test_integration_airgap.py against the harness's real relays).
    expect(Number(/air-gapped tests run: (\d+)/.exec(r.out)?.[1] ?? 0)).toBe(6);
    for (const name of [
      'test_a_request_answered_by_the_dashboard_completes',
      'test_an_answer_to_an_older_request_is_refused',
      'test_a_seat_is_leased_renewed_and_released',
      'test_the_lease_renews_itself_before_it_expires',
      'test_every_seat_taken_is_session_limit_until_one_is_released',
      'test_a_relay_serving_a_forged_pool_is_refused',
    ])
      expect(r.out).toMatch(new RegExp(`^${name} \\(test_integration_airgap\\.Airgap.*\\) \\.\\.\\. ok$`, 'm'));
    const ran = Number(/integration tests run: (\d+)/.exec(r.out)?.[1] ?? 0);
    expect(ran).toBeGreaterThanOrEqual(25);
    for (const mode of ['forged', 'unsigned', 'replayed', 'foreign_nonce', 'unknown_kid', 'stale', 'bad_base64']) {
      expect(r.out).toMatch(
        new RegExp(`^test_tamper_${mode} \\(test_integration\\.Integration.*\\) \\.\\.\\. ok$`, 'm'),
      );
    }
    expect(r.out).toMatch(/^test_tamper_bad_proof_start_token_not_trusted .* \.\.\. ok$/m);
    expect(r.out).toMatch(/^test_tamper_bad_proof_beat_token_not_trusted .* \.\.\. ok$/m);
    expect(r.out).toMatch(/^test_a_debugger_report_kills_the_heartbeat .* \.\.\. ok$/m);
    for (const name of [
      'test_every_beat_tampered_is_compromised_after_5_without_endless_reauth',
      'test_an_outage_then_a_forgotten_session_reauthenticates_once',
      'test_an_outage_during_which_the_key_was_banned_ends_with_banned',
    ])
      expect(r.out).toMatch(new RegExp(`^${name} .* \\.\\.\\. ok$`, 'm'));
  }, 300_000);

  it('the example activates a key, beats three times and exits 0', async () => {
    const echoesBefore = await affinityEchoes(h.env);
    const r = await run([path.join(SDK_DIR, 'examples/activate.py'), lastKey(), h.env.KW_CONFIG_PLAIN!], {
      cwd: tmp,
      timeoutMs: 60_000,
    });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/connected to SDK PLAIN \(version 1\.0\)/);
    expect(r.out).toMatch(/license ok: level 3, expires 20\d\d-/);
    expect(r.out).toMatch(/beat 3 verified \(count 3\)/);
    expect(r.out).toMatch(/heartbeat stopped/);
    // The calls after init (REST, and the channel's upgrade where the SDK has one) sent back the
    // worker the answers named (X-Keywarden-Route).
    const echoes = await affinityEchoes(h.env);
    expect(echoes.echoed - echoesBefore.echoed).toBeGreaterThanOrEqual(2);
    expect(echoes.reached - echoesBefore.reached).toBe(echoes.echoed - echoesBefore.echoed);
    const outdated = await run([path.join(SDK_DIR, 'examples/activate.py'), 'ANY-KEY', h.env.KW_CONFIG_OUTDATED!], {
      cwd: tmp,
      timeoutMs: 60_000,
    });
    expect(outdated.code).toBe(1);
    expect(outdated.out).toMatch(/failed: update_required/);
    expect(outdated.out).toMatch(/download 2\.0 from https:\/\/example\.com\/download\/2\.0/);
  }, 90_000);

  it.skipIf(!hasPackaging)(
    'builds a wheel offline that installs and runs outside the repository',
    async () => {
      const src = path.join(tmp, 'src');
      copySdk(src);
      const wheels = path.join(tmp, 'wheels');
      const built = await run(
        ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index', '-w', wheels, src],
        { cwd: tmp, timeoutMs: 120_000 },
      );
      expect(built.code, built.out).toBe(0);
      const wheel = fs.readdirSync(wheels).find((f) => /^keywarden-[\d.]+-py3-none-any\.whl$/.test(f));
      expect(wheel, fs.readdirSync(wheels).join(',')).toBeDefined();
      const { unzipSync } = await import('fflate');
      const files = unzipSync(new Uint8Array(fs.readFileSync(path.join(wheels, wheel!))));
      expect(Object.keys(files)).toEqual(
        expect.arrayContaining(['keywarden/__init__.py', 'keywarden/aio.py', 'keywarden/py.typed']),
      );
      expect(Object.keys(files).some((f) => f.startsWith('tests/') || f.startsWith('examples/'))).toBe(false);
      const metadata = Buffer.from(Object.entries(files).find(([n]) => n.endsWith('.dist-info/METADATA'))![1]).toString(
        'utf8',
      );
      expect(
        metadata
          .split('\n')
          .filter((l) => l.startsWith('Requires-Dist:'))
          .map((l) => l.split(/[ (<>=;]/)[1]),
      ).toEqual(['cryptography']);

      const target = path.join(tmp, 'site');
      const installed = await run(
        ['-m', 'pip', 'install', '--no-deps', '--no-index', '--target', target, path.join(wheels, wheel!)],
        { cwd: tmp, timeoutMs: 120_000 },
      );
      expect(installed.code, installed.out).toBe(0);
      const consumer = path.join(tmp, 'consumer');
      fs.mkdirSync(consumer);
      fs.writeFileSync(
        path.join(consumer, 'app.py'),
        `
import asyncio, json, os, sys, keywarden
from keywarden import AsyncClient, Client, KeywardenError
assert keywarden.__file__.startswith(os.environ["KW_SITE"]), keywarden.__file__
c = Client.from_config(os.environ["KW_CONFIG_PLAIN"])
app = c.init()
lic = c.activate_license(sys.argv[1], "consumer-hwid-0001")
async def outdated():
    try:
        await AsyncClient.from_config(os.environ["KW_CONFIG_OUTDATED"]).init()
    except KeywardenError as e:
        return e.code.value, e.latest_version
print(json.dumps({"app": app.name, "level": lic.level, "aware": lic.expires_at.tzinfo is not None, "outdated": asyncio.run(outdated())}))
`,
      );
      const r = await run(['app.py', lastKey()], {
        cwd: consumer,
        env: { ...h.env, PYTHONPATH: target, KW_SITE: target },
        timeoutMs: 60_000,
      });
      expect(r.code, r.out).toBe(0);
      expect(JSON.parse(r.out.trim().split('\n').at(-1)!)).toEqual({
        app: 'SDK PLAIN',
        level: 3,
        aware: true,
        outdated: ['update_required', '2.0'],
      });
    },
    240_000,
  );

  it.skipIf(!hasVenv)(
    "installs into a --system-site-packages venv with the README's command, nothing from an index",
    async () => {
      const src = path.join(tmp, 'venv-src');
      copySdk(src);
      const readme = fs.readFileSync(path.join(src, 'README.md'), 'utf8');
      const command = '.venv/bin/pip install --no-build-isolation --no-index .';
      expect(readme).toContain('python3 -m venv --system-site-packages .venv');
      expect(readme).toContain(command);
      const venv = await run(['-m', 'venv', '--system-site-packages', path.join(src, '.venv')], {
        cwd: src,
        timeoutMs: 120_000,
      });
      expect(venv.code, venv.out).toBe(0);
      const vpy = path.join(src, '.venv/bin/python');
      // No index can be reached (--no-index; a proxy or config pointing at one is ignored too).
      const noIndex = { PIP_CONFIG_FILE: os.devNull, PIP_INDEX_URL: 'http://127.0.0.1:9/simple', PIP_NO_INPUT: '1' };
      const [pip, ...pipArgs] = command.split(' ');
      const installed = await runExe(path.join(src, pip!), pipArgs, { cwd: src, env: noIndex, timeoutMs: 180_000 });
      expect(installed.code, installed.out).toBe(0);
      expect(installed.out).toMatch(/Successfully installed keywarden-/);
      // Used from elsewhere: the venv's own copy, which connects to the server.
      const r = await runExe(
        vpy,
        [
          '-c',
          'import os, keywarden; assert "/.venv/" in keywarden.__file__, keywarden.__file__; ' +
            'print("app", keywarden.Client.from_config(os.environ["KW_CONFIG_PLAIN"]).init().name)',
        ],
        { cwd: tmp, env: h.env, timeoutMs: 60_000 },
      );
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain('app SDK PLAIN');
    },
    240_000,
  );

  it('a key that expires while the program beats on the channel is reported expired within about a second', async () => {
    const k = lastKey();
    const r = await runExpiryWatch(h, 'PLAIN', k, {
      cmd: PYTHON,
      args: [
        path.resolve(SDK_DIR, '../../test/sdk/programs/expiry-watch.py'),
        h.env.KW_CONFIG_PLAIN!,
        k,
        'py-expiry-hwid-0001',
      ],
      cwd: tmp,
      env: { ...PY_ENV, PYTHONPATH: SDK_DIR },
    });
    expectExpiredOnTime(r);
  }, 90_000);

  it('finds a published update, downloads its exact bytes and refuses tampered downloads', async () => {
    const dir = path.join(tmp, 'update');
    fs.mkdirSync(dir);
    const u: PublishedUpdate = await publishUpdate(h, tmp);
    try {
      const r = await run(
        [path.resolve(SDK_DIR, '../../test/sdk/programs/update.py'), u.config, lastKey(), 'py-update-hwid-0001', dir],
        { cwd: tmp, env: { PYTHONPATH: SDK_DIR, KW_DL_TAMPER_URLS: JSON.stringify(u.tamperUrls) }, timeoutMs: 120_000 },
      );
      expectUpdateRun(r, u, dir, 'UpdateError');
    } finally {
      await u.close();
    }
  }, 180_000);

  it('the downloaded zip runs its example as the README says', async () => {
    const dir = path.join(tmp, 'zip');
    const root = await downloadSdkZip(h.env, 'python', dir);
    for (const f of [
      'README.md',
      'pyproject.toml',
      'keywarden.json',
      'keywarden/__init__.py',
      'keywarden/py.typed',
      'examples/activate.py',
    ]) {
      expect(fs.existsSync(path.join(root, f)), f).toBe(true);
    }
    expect(fs.readdirSync(root, { recursive: true }).some((f) => String(f).includes('__pycache__'))).toBe(false);
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).toContain('python3 examples/activate.py <LICENSE-KEY>');
    // README quick start, step 2, from the unzipped folder: no install, no arguments but the key.
    const r = await run(['examples/activate.py', lastKey()], { cwd: root, timeoutMs: 60_000 });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/connected to SDK PLAIN/);
    expect(r.out).toMatch(/beat 3 verified/);
    expect(r.out).toMatch(/heartbeat stopped/);
    // The zip's own unit tests run too (vectors are not in the zip: those skip; the rest pass).
    const t = await run(['-m', 'unittest', 'discover', '-s', 'tests'], {
      cwd: root,
      env: { KW_BASE_URL: '', KW_VECTORS_DIR: '' },
      timeoutMs: 120_000,
    });
    expect(t.code, t.out).toBe(0);
  }, 240_000);
});
