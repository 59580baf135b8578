#!/usr/bin/env node
// Builds the web dashboard (web/ -> web/dist/) with Vite, only when web/dist is missing or older
// than any source or config file of web/. `npm start` calls ensureWebBuild() before the server
// starts (through scripts/build.mjs), tests that drive the dashboard call it in their setup, and
// `node scripts/build-web.mjs` (npm run build:web) builds unconditionally.
//
// Vite runs in a child process (the server that `npm start` becomes never loads the bundler), into
// a private directory that is then swapped in place of web/dist, so a server reading web/dist never
// sees a half-written build. Concurrent callers in one process share one build.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const WEB = path.join(ROOT, 'web');
export const WEB_DIST = path.join(WEB, 'dist');
/** Written last into a finished build; its mtime is the build's age. */
const STAMP = '.build-stamp';
/** What the build reads besides src/ and public/ (tests and scripts/ are not part of the bundle). */
const CONFIG_FILES = ['index.html', 'portal.html', 'vite.config.ts', 'package.json', 'tsconfig.json'];
const SOURCE_DIRS = ['src', 'public'];
const NOT_BUNDLED = /\.test\.tsx?$/;

async function newestInput(web) {
  let newest = { file: '', mtime: 0 };
  const consider = async (file) => {
    try {
      const { mtimeMs } = await fs.stat(file);
      if (mtimeMs > newest.mtime) newest = { file, mtime: mtimeMs };
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
  };
  const walk = async (dir) => {
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (err.code === 'ENOENT') return;
      throw err;
    }
    await consider(dir); // a deleted file changes its directory's mtime
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (e.isFile() && !NOT_BUNDLED.test(e.name)) await consider(full);
    }
  };
  for (const f of CONFIG_FILES) await consider(path.join(web, f));
  for (const d of SOURCE_DIRS) await walk(path.join(web, d));
  return newest;
}

/** Why web/dist must be rebuilt, or undefined when it is newer than every input. */
export async function webStaleReason(web = WEB) {
  let built;
  try {
    built = (await fs.stat(path.join(web, 'dist', STAMP))).mtimeMs;
    await fs.access(path.join(web, 'dist', 'index.html'));
  } catch {
    return 'no build yet';
  }
  const newest = await newestInput(web);
  if (newest.mtime > built) return `${path.relative(web, newest.file) || 'web/'} changed since the last build`;
  return undefined;
}

function runVite(web, outDir) {
  let viteBin;
  try {
    // vite's exports map does not expose bin/: resolve its package.json and follow "bin".
    const pkgFile = createRequire(path.join(web, 'package.json')).resolve('vite/package.json');
    const { bin } = JSON.parse(readFileSync(pkgFile, 'utf8'));
    viteBin = path.join(path.dirname(pkgFile), typeof bin === 'string' ? bin : bin.vite);
  } catch {
    throw new Error('cannot build web/dist: the vite package is not installed (run `npm ci` at the repository root)');
  }
  return new Promise((resolve, reject) => {
    // Diagnostics go to our stderr: stdout stays free for the server's JSON log under `npm start`.
    const child = spawn(
      process.execPath,
      [viteBin, 'build', '--outDir', outDir, '--emptyOutDir', '--logLevel', 'warn'],
      {
        cwd: web,
        // Always the production build of React: a caller's NODE_ENV (vitest sets `test`) must not leak in.
        env: { ...process.env, NODE_ENV: 'production' },
        stdio: ['ignore', 2, 2],
      },
    );
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`vite build failed (${signal ?? `exit ${code}`}); web/dist was left as it was`));
    });
  });
}

/** Builds into a private directory, stamps it, then swaps it in place of web/dist. */
export async function buildWeb({
  web = WEB,
  reason = 'requested',
  log = (m) => console.error(m),
  ifStale = false,
} = {}) {
  const dist = path.join(web, 'dist');
  const tmp = path.join(web, `.dist-tmp-${process.pid}`);
  const old = path.join(web, `.dist-old-${process.pid}`);
  const started = Date.now();
  log(`keywarden: building the web dashboard with Vite (${reason})...`);
  await fs.rm(tmp, { recursive: true, force: true });
  try {
    const stampTime = new Date(); // taken before building: an edit during the build makes the next start rebuild
    await runVite(web, tmp);
    await fs.writeFile(path.join(tmp, STAMP), `${stampTime.toISOString()}\n`);
    await fs.utimes(path.join(tmp, STAMP), stampTime, stampTime);
    // Another process (a test file running beside this one) swapped a fresh build in meanwhile: it
    // stays, so a server of that process never finds web/dist gone between the two renames below.
    if (ifStale && (await webStaleReason(web)) === undefined) {
      log('keywarden: web/dist was built meanwhile by another process; keeping it');
      return;
    }
    await fs.rename(dist, old).catch((err) => {
      if (err.code !== 'ENOENT') throw err;
    });
    try {
      await fs.rename(tmp, dist);
    } catch (err) {
      // Another process swapped its own build in between: keep it (both are of the same sources).
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    }
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.rm(old, { recursive: true, force: true });
  }
  log(`keywarden: web/dist built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

let pending;

/** Builds web/dist when it is missing or stale (one build at a time per process); returns its path. */
export function ensureWebBuild(log) {
  pending ??= (async () => {
    try {
      const reason = await webStaleReason(WEB);
      if (reason) {
        try {
          await fs.access(WEB, fs.constants.W_OK);
        } catch (err) {
          throw new Error(
            `web/dist is stale (${reason}) and ${WEB} is not writable here (${err.code}): run \`npm run build:web\` there as its owner`,
          );
        }
        await buildWeb({ reason, ifStale: true, ...(log ? { log } : {}) });
      }
      return WEB_DIST;
    } finally {
      pending = undefined;
    }
  })();
  return pending;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    await buildWeb({ reason: 'npm run build:web' });
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
