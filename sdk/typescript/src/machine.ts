// Machine identity and integrity helpers. The raw machine id never leaves the machine: what is
// sent is sha256("kwhwid1\n" + salt + "\n" + id), so two vendors (different salts) cannot
// correlate their users and a leaked hwid does not reveal the id.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import inspector from 'node:inspector';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';

function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      timeout: 5000,
      stdio: ['ignore', 'pipe', 'ignore'],
      windowsHide: true,
    });
  } catch {
    return '';
  }
}

function readFirst(files: string[]): string {
  for (const f of files) {
    try {
      const v = fs.readFileSync(f, 'utf8').trim();
      if (v) return v;
    } catch {
      // try the next one
    }
  }
  return '';
}

/** The platform's machine id: Windows MachineGuid, Linux /etc/machine-id, macOS IOPlatformUUID. */
export function rawMachineId(): string {
  switch (process.platform) {
    case 'win32': {
      const out = run('reg', ['query', 'HKLM\\SOFTWARE\\Microsoft\\Cryptography', '/v', 'MachineGuid']);
      return /MachineGuid\s+REG_SZ\s+(\S+)/i.exec(out)?.[1] ?? '';
    }
    case 'darwin': {
      const out = run('ioreg', ['-rd1', '-c', 'IOPlatformExpertDevice']);
      return /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(out)?.[1] ?? '';
    }
    default:
      return readFirst(['/etc/machine-id', '/var/lib/dbus/machine-id']);
  }
}

/**
 * A stable, salted hardware id (64 hex characters). The client passes its api_key as salt.
 * Without a platform id (containers without /etc/machine-id) it falls back to hostname, platform
 * and CPU model, which is weaker: pass your own hwid to the activation calls if that matters.
 */
export function machineHwid(salt = ''): string {
  let id = rawMachineId().trim().toLowerCase();
  if (!id) id = `fallback:${os.hostname()}:${process.platform}:${os.arch()}:${os.cpus()[0]?.model ?? ''}`;
  return createHash('sha256').update(`kwhwid1\n${salt}\n${id}`, 'utf8').digest('hex');
}

/**
 * SHA-256 (lower-case hex) of the running program, for code_hash / binary_hash. Default: the
 * executable itself when it is not the stock `node` binary (a single executable application),
 * else the entry script (process.argv[1]).
 */
export function selfHash(file?: string): string {
  let target = file;
  if (!target) {
    const exe = path.basename(process.execPath).toLowerCase();
    target = /^node(\.exe)?$/.test(exe) && process.argv[1] ? path.resolve(process.argv[1]) : process.execPath;
  }
  return createHash('sha256').update(fs.readFileSync(target)).digest('hex');
}

/** True when a debugger can be attached (the inspector is open). */
export function debuggerAttached(): boolean {
  return inspector.url() !== undefined;
}
