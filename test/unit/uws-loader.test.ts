// Which uWebSockets.js build the loader picks, over what each attempt to load one reported, and
// the refusal it prints otherwise (the message docs/runtime.md documents). The attempts are canned
// here with the error texts the real packages give; the last tests load the real builds.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chooseUwsBuild,
  loadUws,
  runtimeFacts,
  uwsBuildInUse,
  versionBelow,
  UWS_BUILDS,
  type RuntimeFacts,
  type UwsBuildName,
  type UwsLoadOutcome,
} from '../../src/platform/http/uws-loader.js';

const root = path.resolve(import.meta.dirname, '../..');
const DEBIAN_12 = { platform: 'linux', arch: 'x64', glibc: '2.36' };
const DEBIAN_13 = { platform: 'linux', arch: 'x64', glibc: '2.41' };
const node = (v: string, abi: string) => ({ node: v, abi });

// The texts the packages throw (20.57 wraps the dlopen error in its own sentence).
const needsGlibc = (abi: string): UwsLoadOutcome => ({
  failed:
    'This version of uWS.js (v20.57.0) supports only Node.js versions 20, 22, 24 and 25 on (glibc) Linux, macOS ' +
    "and Windows.\n\nError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by " +
    `/opt/keywarden/node_modules/uWebSockets.js/uws_linux_x64_${abi}.node)`,
});
const noBinary = (abi: string): UwsLoadOutcome => ({
  failed: `This version of uWS.js (v20.57.0) supports only Node.js versions 20, 22, 24 and 25.\n\nError: Cannot find module './uws_linux_x64_${abi}.node'`,
});
const notInstalled = (pkg: string): UwsLoadOutcome => ({
  failed: `Cannot find module '${pkg}'\nRequire stack:\n- /opt/keywarden/src/http/uws-loader.ts`,
});

/** Runs the choice with canned outcomes and records which builds it tried, in order. */
function choose(rt: RuntimeFacts, outcomes: Partial<Record<UwsBuildName, UwsLoadOutcome>>) {
  const tried: UwsBuildName[] = [];
  const choice = chooseUwsBuild(rt, (b) => {
    tried.push(b);
    const o = outcomes[b];
    if (!o) throw new Error(`no canned outcome for ${b}`);
    return o;
  });
  return { choice, tried };
}

describe('chooseUwsBuild', () => {
  it('takes the current build whenever its binary loads, on every supported line, without trying the 20.30 one', () => {
    for (const [v, abi] of [
      ['20.20.2', '115'],
      ['22.23.3', '127'],
      ['24.21.0', '137'],
    ] as const) {
      expect(choose({ ...node(v, abi), ...DEBIAN_13 }, { current: { loaded: 'native' } })).toEqual({
        choice: { build: 'current' },
        tried: ['current'],
      });
    }
  });

  it('falls back to the 20.30 build on Node.js 20 when the current binary needs a newer glibc', () => {
    const r = choose(
      { ...node('20.20.2', '115'), ...DEBIAN_12 },
      { current: needsGlibc('115'), legacy: { loaded: 'native' } },
    );
    expect(r).toEqual({ choice: { build: 'legacy' }, tried: ['current', 'legacy'] });
  });

  it('refuses Node.js 22 on glibc 2.36 without trying the 20.30 build, naming the runtime, the glibc and what to install', () => {
    const { choice, tried } = choose({ ...node('22.23.3', '127'), ...DEBIAN_12 }, { current: needsGlibc('127') });
    expect(tried).toEqual(['current']);
    expect(choice).toEqual({
      refusal: [
        'Keywarden cannot start: no uWebSockets.js build serves Node.js 22.23.3 (ABI 127, linux-x64, glibc 2.36).',
        '  uWebSockets.js 20.57.0: needs glibc 2.38 or newer; this system has glibc 2.36',
        '  uWebSockets.js 20.30.0: serves Node.js 20 only',
        'Install instead:',
        '  - Node.js 22 or 24 on a distribution with glibc 2.38 or newer (Ubuntu 24.04, Debian 13), or',
        '  - Node.js 20 on this system (served by the 20.30 build; Node.js 20 reached end of life on 2026-04-30)',
        'Support matrix: docs/runtime.md',
      ].join('\n'),
    });
  });

  it('never accepts the 20.30 JavaScript fallback: refused, with the reinstall advice for Node.js 20', () => {
    const { choice } = choose(
      { ...node('20.20.2', '115'), ...DEBIAN_12 },
      { current: needsGlibc('115'), legacy: { loaded: 'fallback' } },
    );
    expect('refusal' in choice && choice.refusal).toMatch(
      /20\.30\.0: loaded only its slow JavaScript fallback, which Keywarden refuses/,
    );
    expect('refusal' in choice && choice.refusal).toMatch(
      /- the packages again \(`npm ci`\): the 20\.30 build should serve Node\.js 20/,
    );
    expect('refusal' in choice && choice.refusal).not.toMatch(/- Node\.js 20 on this system/);
  });

  it('a current build that came up without its native binary is not taken either', () => {
    const r = choose(
      { ...node('20.20.2', '115'), ...DEBIAN_13 },
      { current: { loaded: 'fallback' }, legacy: { loaded: 'native' } },
    );
    expect(r).toEqual({ choice: { build: 'legacy' }, tried: ['current', 'legacy'] });
  });

  it('refuses a Node.js line without a binary (26, or end-of-life 18) and points at 22 or 24', () => {
    for (const [v, abi] of [
      ['26.1.0', '147'],
      ['18.20.8', '108'],
    ] as const) {
      const { choice, tried } = choose({ ...node(v, abi), ...DEBIAN_13 }, { current: noBinary(abi) });
      expect(tried).toEqual(['current']);
      const text = 'refusal' in choice ? choice.refusal : '';
      expect(text).toContain(
        `uWebSockets.js 20.57.0: has no binary for Node.js ${v.split('.')[0]} (ABI ${abi}) on linux-x64`,
      );
      expect(text).toContain('  - Node.js 22 or 24 (LTS lines with a binary in the current build)');
      expect(text).not.toContain('Node.js 20 on this system');
    }
  });

  it('on musl (no glibc) says so and names glibc distributions', () => {
    const { choice } = choose(
      { ...node('22.23.3', '127'), platform: 'linux', arch: 'x64', glibc: null },
      {
        current: {
          failed:
            'Error relocating /opt/keywarden/node_modules/uWebSockets.js/uws_linux_x64_127.node: __memcpy_chk: symbol not found',
        },
      },
    );
    const text = 'refusal' in choice ? choice.refusal : '';
    expect(text).toContain('(ABI 127, linux-x64, glibc not found)');
    expect(text).toContain('20.57.0: Error relocating');
    expect(text).toContain('uWebSockets.js ships glibc binaries only (no musl, no Alpine)');
  });

  it('a package missing from node_modules is reported as such, with npm ci to fix it', () => {
    const { choice } = choose(
      { ...node('20.20.2', '115'), ...DEBIAN_12 },
      { current: needsGlibc('115'), legacy: notInstalled('uws-legacy') },
    );
    const text = 'refusal' in choice ? choice.refusal : '';
    expect(text).toContain('uWebSockets.js 20.30.0: is not installed (run npm ci)');
    expect(text).toContain('  - the packages: run `npm ci` in the Keywarden directory');
  });

  it('macOS has no glibc line in the message', () => {
    const { choice } = choose(
      { ...node('26.1.0', '147'), platform: 'darwin', arch: 'arm64', glibc: null },
      { current: noBinary('147') },
    );
    expect('refusal' in choice && choice.refusal.split('\n')[0]).toBe(
      'Keywarden cannot start: no uWebSockets.js build serves Node.js 26.1.0 (ABI 147, darwin-arm64).',
    );
  });
});

describe('versionBelow', () => {
  it('compares dotted versions numerically', () => {
    expect(versionBelow('2.36', '2.38')).toBe(true);
    expect(versionBelow('2.38', '2.38')).toBe(false);
    expect(versionBelow('2.100', '2.38')).toBe(false);
    expect(versionBelow('2.9', '2.38')).toBe(true);
    expect(versionBelow('3', '2.38')).toBe(false);
  });
});

describe('the installed builds', () => {
  it('are the releases the loader names, under the package names it requires', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    for (const b of Object.values(UWS_BUILDS)) {
      expect(pkg.dependencies[b.pkg], b.pkg).toMatch(new RegExp(`@${b.release.replaceAll('.', '\\.')}(-|$)`));
      const installed = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', b.pkg, 'package.json'), 'utf8')) as {
        version: string;
      };
      expect(installed.version.startsWith(b.release), b.pkg).toBe(true);
    }
  });

  it('this process gets a native build: the current one where glibc is 2.38 or newer, else the 20.30 one on Node.js 20', () => {
    const rt = runtimeFacts();
    const uws = loadUws();
    expect(Function.prototype.toString.call(uws.App)).toContain('[native code]');
    const newGlibc = rt.platform !== 'linux' || (rt.glibc !== null && !versionBelow(rt.glibc, '2.38'));
    expect(uwsBuildInUse()).toBe(newGlibc ? 'current' : 'legacy');
  });
});
