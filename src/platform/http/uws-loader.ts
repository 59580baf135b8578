// Chooses, once per process, which uWebSockets.js build serves HTTP and WebSockets.
// Two builds are installed because no single one covers the supported runtimes:
// - `uWebSockets.js` (the current build, 20.57): binaries for Node.js 20, 22, 24 and 25, linked
//   against glibc 2.38, so they cannot load on Debian 12 (2.36), Ubuntu 22.04 or RHEL 9;
// - `uws-legacy` (20.30): binaries up to Node.js 20, linked against old glibc; when its binary
//   cannot load it silently swaps in a slow JavaScript shim, which Keywarden refuses.
// Order: the current build when its binary loads, else the 20.30 build on Node.js 20, else a
// refusal that says what runs here and what to install instead (docs/runtime.md).
import { createRequire } from 'node:module';
import type * as UwsTypes from 'uWebSockets.js';

export type Uws = typeof UwsTypes;
export type UwsBuildName = 'current' | 'legacy';

/** Package name and release of each build; the releases are checked against package.json by a test. */
export const UWS_BUILDS: Record<UwsBuildName, { pkg: string; release: string }> = {
  current: { pkg: 'uWebSockets.js', release: '20.57.0' },
  legacy: { pkg: 'uws-legacy', release: '20.30.0' },
};

/** The oldest glibc the current build's Linux binaries load on. */
const CURRENT_BUILD_MIN_GLIBC = '2.38';

export interface RuntimeFacts {
  /** process.versions.node, e.g. `22.23.3`. */
  node: string;
  /** process.versions.modules, the native-addon ABI, e.g. `127`. */
  abi: string;
  platform: string;
  arch: string;
  /** glibc found at run time; null where there is none (musl, macOS, Windows). */
  glibc: string | null;
}

/** What requiring one build did: its native binary, the JavaScript shim, or an error. */
export type UwsLoadOutcome = { loaded: 'native' | 'fallback' } | { failed: string };

type UwsChoice = { build: UwsBuildName } | { refusal: string };

export class UwsUnavailableError extends Error {
  override readonly name = 'UwsUnavailableError';
}

/**
 * The choice, over what each attempt reported. `attempt` is called for the builds worth trying, in
 * order: the 20.30 build only on Node.js 20 and only when the current one did not load natively.
 */
export function chooseUwsBuild(rt: RuntimeFacts, attempt: (build: UwsBuildName) => UwsLoadOutcome): UwsChoice {
  const current = attempt('current');
  if (isNative(current)) return { build: 'current' };
  const legacy = nodeMajor(rt) === 20 ? attempt('legacy') : undefined;
  if (legacy && isNative(legacy)) return { build: 'legacy' };
  return { refusal: refusalMessage(rt, current, legacy) };
}

function isNative(o: UwsLoadOutcome): boolean {
  return 'loaded' in o && o.loaded === 'native';
}

function nodeMajor(rt: RuntimeFacts): number {
  return Number(rt.node.split('.')[0]);
}

/** Numeric comparison of dotted versions: `2.36` < `2.38` < `2.100`. */
export function versionBelow(a: string, b: string): boolean {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0;
  }
  return false;
}

const NOT_INSTALLED = /Cannot find (?:module|package) '(?:uWebSockets\.js|uws-legacy)'/;

function reason(rt: RuntimeFacts, o: UwsLoadOutcome | undefined): string {
  if (!o) return `serves Node.js 20 only`;
  if ('loaded' in o) return 'loaded only its slow JavaScript fallback, which Keywarden refuses to run on';
  const glibc = /GLIBC_([\d.]+)' not found/.exec(o.failed);
  if (glibc) return `needs glibc ${glibc[1]} or newer; this system has glibc ${rt.glibc ?? 'unknown'}`;
  if (/Cannot find module '[^']*\.node'/.test(o.failed)) {
    return `has no binary for Node.js ${nodeMajor(rt)} (ABI ${rt.abi}) on ${rt.platform}-${rt.arch}`;
  }
  if (NOT_INSTALLED.test(o.failed)) return 'is not installed (run npm ci)';
  return o.failed.split('\n').find((l) => l.trim() !== '') ?? o.failed;
}

function advice(rt: RuntimeFacts, current: UwsLoadOutcome, legacy: UwsLoadOutcome | undefined): string[] {
  const modern = 'Node.js 22 or 24';
  const newDistro = `a distribution with glibc ${CURRENT_BUILD_MIN_GLIBC} or newer (Ubuntu 24.04, Debian 13)`;
  const missing = [current, legacy].some((o) => o && 'failed' in o && NOT_INSTALLED.test(o.failed));
  if (missing) return ['the packages: run `npm ci` in the Keywarden directory'];
  if (rt.platform === 'linux' && rt.glibc === null) {
    return [`${modern} on ${newDistro}: uWebSockets.js ships glibc binaries only (no musl, no Alpine)`];
  }
  if (rt.platform === 'linux' && rt.glibc !== null && versionBelow(rt.glibc, CURRENT_BUILD_MIN_GLIBC)) {
    const here =
      nodeMajor(rt) === 20
        ? 'the packages again (`npm ci`): the 20.30 build should serve Node.js 20 on this system'
        : 'Node.js 20 on this system (served by the 20.30 build; Node.js 20 reached end of life on 2026-04-30)';
    return [`${modern} on ${newDistro}, or`, here];
  }
  return [`${modern} (LTS lines with a binary in the current build)`];
}

function refusalMessage(rt: RuntimeFacts, current: UwsLoadOutcome, legacy?: UwsLoadOutcome): string {
  const where = `${rt.platform}-${rt.arch}${rt.platform === 'linux' ? `, glibc ${rt.glibc ?? 'not found'}` : ''}`;
  return [
    `Keywarden cannot start: no uWebSockets.js build serves Node.js ${rt.node} (ABI ${rt.abi}, ${where}).`,
    `  uWebSockets.js ${UWS_BUILDS.current.release}: ${reason(rt, current)}`,
    `  uWebSockets.js ${UWS_BUILDS.legacy.release}: ${reason(rt, legacy)}`,
    'Install instead:',
    ...advice(rt, current, legacy).map((a) => `  - ${a}`),
    'Support matrix: docs/runtime.md',
  ].join('\n');
}

export function runtimeFacts(): RuntimeFacts {
  // The report header is where Node.js itself says which glibc it runs on (absent without glibc).
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  return {
    node: process.versions.node,
    abi: process.versions.modules,
    platform: process.platform,
    arch: process.arch,
    glibc: report.header?.glibcVersionRuntime ?? null,
  };
}

/** The 20.30 build's shim has JavaScript functions where the binary has native ones. */
function isNativeBinding(m: Uws): boolean {
  return typeof m.App === 'function' && Function.prototype.toString.call(m.App).includes('[native code]');
}

// What a process can load does not change while it runs: chosen once, like the require cache
// the builds themselves live in.
let chosen: { uws: Uws; build: UwsBuildName } | undefined;

/** The uWebSockets.js build this process serves with; throws UwsUnavailableError with the refusal. */
export function loadUws(): Uws {
  return (chosen ??= choose()).uws;
}

/** Which build loadUws() chose (loading it first if needed). */
export function uwsBuildInUse(): UwsBuildName {
  return (chosen ??= choose()).build;
}

function choose(): { uws: Uws; build: UwsBuildName } {
  const require = createRequire(import.meta.url);
  const modules: Partial<Record<UwsBuildName, Uws>> = {};
  const choice = chooseUwsBuild(runtimeFacts(), (build) => {
    try {
      const m = require(UWS_BUILDS[build].pkg) as Uws;
      modules[build] = m;
      return { loaded: isNativeBinding(m) ? 'native' : 'fallback' };
    } catch (err) {
      return { failed: err instanceof Error ? err.message : String(err) };
    }
  });
  if ('refusal' in choice) throw new UwsUnavailableError(choice.refusal);
  return { uws: modules[choice.build]!, build: choice.build };
}
