#!/usr/bin/env node
// Production build of the server: `tsc -p tsconfig.build.json` into dist/ (dist/src/cli.js and the rest),
// so `npm start` and bin/keywarden.js run plain JavaScript: no TypeScript loader, no esbuild process.
//
// dist/.build-stamp records a fingerprint of every input (each file under src/, both tsconfigs,
// package.json, package-lock.json and this script, by content). A start compares it with the tree and
// rebuilds when anything was added, changed or deleted; content, not mtimes, so a `git checkout` or
// an mtime-preserving copy cannot leave an old build running.
//
// A build goes to a private directory first and is then swapped in, so a process starting meanwhile
// (a respawned cluster worker, a second CLI call) never loads a half-written dist/.
//
// `node scripts/build.mjs` (npm run build) builds unconditionally, plus the web dashboard when
// scripts/build-web.mjs exists.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = path.join(ROOT, 'dist');
export const DIST_CLI = path.join(DIST, 'src', 'cli.js');
const STAMP = '.build-stamp';
const INPUT_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json', 'scripts/build.mjs'];
const INPUT_DIRS = ['src'];

async function listFiles(dir) {
  const out = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(full)));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

/** sha256 over the relative path and content of every build input, in a fixed order. */
export async function fingerprint(root = ROOT) {
  const files = [];
  for (const d of INPUT_DIRS) files.push(...(await listFiles(path.join(root, d))));
  for (const f of INPUT_FILES) files.push(path.join(root, f));
  const hash = createHash('sha256');
  for (const file of files.map((f) => path.relative(root, f)).sort()) {
    hash.update(file).update('\0');
    try {
      hash.update(await fs.readFile(path.join(root, file)));
    } catch (err) {
      if (err.code !== 'ENOENT') throw err; // an optional input (no lock file) hashes as absent
      hash.update('<absent>');
    }
    hash.update('\0');
  }
  return hash.digest('hex');
}

async function readStamp(dist) {
  try {
    return JSON.parse(await fs.readFile(path.join(dist, STAMP), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Why dist/ must be rebuilt, or undefined when it matches the tree. */
export async function staleReason(root = ROOT) {
  const dist = path.join(root, 'dist');
  const stamp = await readStamp(dist);
  if (!stamp) return 'no build yet';
  if (stamp.fingerprint !== (await fingerprint(root))) return 'sources changed since the last build';
  try {
    await fs.access(path.join(dist, 'src', 'cli.js'));
  } catch {
    return 'dist/src/cli.js is missing';
  }
  return undefined;
}

function runTsc(root, outDir) {
  let tsc;
  try {
    tsc = createRequire(path.join(root, 'package.json')).resolve('typescript/bin/tsc');
  } catch {
    throw new Error('cannot build dist/: the typescript package is not installed (run `npm ci`, then `npm run build`)');
  }
  return new Promise((resolve, reject) => {
    // The compiler's diagnostics go to our stderr; stdout stays free for the server's JSON log.
    const child = spawn(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', outDir], {
      cwd: root,
      stdio: ['ignore', 2, 2],
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`tsc -p tsconfig.build.json failed (${signal ?? `exit ${code}`}); dist/ was left as it was`));
    });
  });
}

/** Compiles into a private directory, stamps it, then swaps it in place of dist/. */
export async function buildServer({ root = ROOT, reason = 'requested', log = (m) => console.error(m) } = {}) {
  const dist = path.join(root, 'dist');
  const tmp = path.join(root, `.dist-tmp-${process.pid}`);
  const old = path.join(root, `.dist-old-${process.pid}`);
  const print = await fingerprint(root); // taken before compiling: an edit during the build makes the next start rebuild
  const started = Date.now();
  log(`keywarden: building dist/ with tsc (${reason})...`);
  await fs.rm(tmp, { recursive: true, force: true });
  try {
    await runTsc(root, tmp);
    await fs.writeFile(path.join(tmp, STAMP), `${JSON.stringify({ fingerprint: print, builtAt: new Date().toISOString() })}\n`);
    await fs.rename(dist, old).catch((err) => {
      if (err.code !== 'ENOENT') throw err;
    });
    try {
      await fs.rename(tmp, dist);
    } catch (err) {
      // Another build swapped its own dist/ in between: keep it when it is of the same sources.
      if ((err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') || (await readStamp(dist))?.fingerprint !== print) throw err;
    }
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.rm(old, { recursive: true, force: true });
  }
  log(`keywarden: dist/ built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Builds dist/ when it is missing or stale; returns the compiled CLI's path. */
export async function ensureServerBuild({ root = ROOT, log } = {}) {
  const reason = await staleReason(root);
  if (reason) {
    // A service user on a read-only checkout (the systemd unit) cannot build: say what to do.
    try {
      await fs.access(root, fs.constants.W_OK);
    } catch (err) {
      throw new Error(`dist/ is stale (${reason}) and ${root} is not writable here (${err.code}): run \`npm run build\` there as its owner`);
    }
    await buildServer({ root, reason, ...(log ? { log } : {}) });
  }
  return path.join(root, 'dist', 'src', 'cli.js');
}

/** Runs scripts/build-web.mjs's ensureWebBuild() when that script exists (the web dashboard). */
export async function ensureWebBuildIfPresent(root = ROOT) {
  const file = path.join(root, 'scripts', 'build-web.mjs');
  try {
    await fs.access(file);
  } catch {
    return false;
  }
  const mod = await import(pathToFileURL(file).href);
  if (typeof mod.ensureWebBuild !== 'function') throw new Error('scripts/build-web.mjs does not export ensureWebBuild()');
  await mod.ensureWebBuild();
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    await buildServer({ reason: 'npm run build' });
    await ensureWebBuildIfPresent();
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
