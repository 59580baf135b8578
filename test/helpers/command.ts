// Runs a toolchain command (cmake, ctest, mono, a built example...) for the SDK tests.
// Asynchronously: the server under test runs in the calling process and must keep answering while
// the child runs. The child leads its own process group, so a timeout or an abort ends everything
// it started too (cmake -> ninja -> g++), not just the first process.
import { spawn } from 'node:child_process';

export interface CommandResult {
  code: number | null;
  /** stdout and stderr, interleaved as they arrived */
  out: string;
}

export interface CommandOptions {
  cwd: string;
  env?: Record<string, string>;
  timeoutMs: number;
  /** Aborting kills the process group (an afterAll ending a command still running in the background). */
  signal?: AbortSignal;
}

export function runCommand(cmd: string, args: string[], o: CommandOptions): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: o.cwd, env: { ...process.env, ...o.env }, detached: true });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL'); // the group is gone already (or was never made)
      }
    };
    const timer = setTimeout(kill, o.timeoutMs);
    if (o.signal?.aborted) kill();
    o.signal?.addEventListener('abort', kill, { once: true });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', kill);
      resolve({ code, out });
    });
  });
}
