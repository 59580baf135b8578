// Ownership of a DATA_DIR's embedded PostgreSQL: one Keywarden process (the server, the cluster
// supervisor, or a command line that started its own database) holds DATA_DIR/keywarden.lock.
//
// The file names the holder's PID and its start time from /proc/<pid>/stat, so a lock left by a
// SIGKILLed process is recognised as stale even when the PID has been reused since. The holder
// also publishes its PostgreSQL address there, so `owner create` and friends attach to the running
// database instead of starting (or stopping) one. Node has no flock(2); creating the file with
// link(2) is atomic, and a stale file is moved aside with rename(2) before it is removed, so two
// processes clearing the same stale lock never both win.
import fs from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { randomToken } from '../crypto/index.js';

const LOCK_FILE = 'keywarden.lock';

/** Where the holder's PostgreSQL listens (a socket directory as host, or 127.0.0.1). */
interface PublishedDb {
  host: string;
  port: number;
}

interface LockInfo {
  pid: number;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot); null where there is no /proc. */
  start: string | null;
  db?: PublishedDb;
}

export class DataDirBusyError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`DATA_DIR ${dataDir} is in use by Keywarden process ${pid}; stop it first or use another DATA_DIR`);
  }
}

export interface DataDirLock {
  /** Records the running PostgreSQL's address for processes that attach to it. */
  publish(db: PublishedDb): Promise<void>;
  /** Removes the lock if it is still ours. Idempotent. */
  release(): Promise<void>;
}

/** The start time of a live process, or null when /proc cannot tell (not Linux, process gone). */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the process that wrote `info` is still running (not merely its PID reused). */
function holderAlive(info: LockInfo): boolean {
  // A lock naming us was left by an earlier run (a container's PID 1); 0 marks an unreadable file.
  if (info.pid <= 0 || info.pid === process.pid) return false;
  if (!processAlive(info.pid)) return false;
  const now = processStart(info.pid);
  return now === null || info.start === null || now === info.start;
}

async function readLock(file: string): Promise<LockInfo | undefined> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const v = JSON.parse(text) as LockInfo;
    return Number.isInteger(v.pid) && v.pid > 0 ? v : { pid: 0, start: null };
  } catch {
    return { pid: 0, start: null }; // unreadable: nobody can be holding it
  }
}

/** The live holder of DATA_DIR's lock, if any. */
export async function lockHolder(dataDir: string): Promise<LockInfo | undefined> {
  const info = await readLock(path.join(dataDir, LOCK_FILE));
  return info && holderAlive(info) ? info : undefined;
}

async function writeNew(file: string, info: LockInfo): Promise<boolean> {
  const tmp = `${file}.${process.pid}.${randomToken(6)}`;
  await fs.writeFile(tmp, JSON.stringify(info) + '\n', { mode: 0o644 });
  try {
    await fs.link(tmp, file); // fails with EEXIST when someone holds (or held) it
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

/** Takes DATA_DIR's lock or throws DataDirBusyError naming the live holder. */
export async function lockDataDir(dataDir: string, log: Logger): Promise<DataDirLock> {
  const file = path.join(dataDir, LOCK_FILE);
  const mine: LockInfo = { pid: process.pid, start: processStart(process.pid) };
  for (let attempt = 0; attempt < 10; attempt++) {
    if (await writeNew(file, mine)) return ownLock(file, mine);
    const held = await readLock(file);
    if (!held) continue; // released meanwhile
    if (holderAlive(held)) throw new DataDirBusyError(dataDir, held.pid);
    const aside = `${file}.stale.${process.pid}.${randomToken(6)}`;
    try {
      await fs.rename(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // another process moved it first
      throw err;
    }
    const moved = await readLock(aside);
    if (moved && holderAlive(moved)) {
      // Between our read and the rename another process replaced the stale lock with its own: put it back.
      await fs.link(aside, file).catch(() => undefined);
    } else {
      log.warn({ holder: held.pid }, 'db.embedded.stale_lock: DATA_DIR was locked by a Keywarden process that is gone');
    }
    await fs.rm(aside, { force: true });
  }
  throw new Error(`could not take the lock ${file}`);
}

function ownLock(file: string, mine: LockInfo): DataDirLock {
  let released: Promise<void> | undefined;
  return {
    async publish(db) {
      const tmp = `${file}.${process.pid}.${randomToken(6)}`;
      await fs.writeFile(tmp, JSON.stringify({ ...mine, db }) + '\n', { mode: 0o644 });
      await fs.rename(tmp, file); // atomic replace: a reader sees the old or the new content, never half
    },
    release: () =>
      (released ??= (async () => {
        const held = await readLock(file).catch(() => undefined);
        if (held?.pid === mine.pid && held.start === mine.start) await fs.rm(file, { force: true });
      })()),
  };
}
