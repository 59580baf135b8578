// The previous release of this repository, for rolling-upgrade tests (docs/multi-host.md "Rolling
// upgrades"): a pinned commit, taken out of this checkout's git history with `git archive`, installed
// once with `npm ci` (from npm's cache when it has the packages) into the test cache (KEYWARDEN_TEST_CACHE,
// default ~/.cache/keywarden-test) and reused by later runs. It is run from its sources (tsx), as the
// tests run this checkout.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The release before cluster versions (main before the rolling-upgrade work): it announces none. */
export const PREVIOUS_RELEASE = 'e99770ed7fb0a9e50a9735b2e9f212783b0458bd';

const root = path.resolve(import.meta.dirname, '../..');

const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { stdio: 'ignore', timeout: 120_000 });

/**
 * Whether this checkout's history holds the pinned commit; a shallow clone that lacks it fetches it
 * from its origin first.
 */
export function previousReleaseAvailable(): boolean {
  const has = () => {
    try {
      git('cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`);
      return true;
    } catch {
      return false;
    }
  };
  if (has()) return true;
  try {
    git('fetch', '--quiet', '--depth=1', 'origin', PREVIOUS_RELEASE);
  } catch {
    return false;
  }
  return has();
}

/** The folder of the previous release, ready to run (built now when the cache has none). */
export function previousRelease(): string {
  const cache = process.env.KEYWARDEN_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'keywarden-test');
  const dir = path.join(cache, `release-${PREVIOUS_RELEASE.slice(0, 12)}`);
  if (fs.existsSync(path.join(dir, '.built'))) return dir;
  fs.mkdirSync(cache, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(cache, 'release-building-'));
  try {
    execFileSync('sh', ['-c', `git -C "${root}" archive ${PREVIOUS_RELEASE} | tar -x -C "${tmp}"`], {
      stdio: 'pipe',
    });
    // The server's packages only: the dashboard's (workspace web) are not needed to serve the API.
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline', '--workspaces=false'], {
      cwd: tmp,
      stdio: 'pipe',
      timeout: 600_000,
    });
    fs.writeFileSync(path.join(tmp, '.built'), `${PREVIOUS_RELEASE}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return dir;
}
