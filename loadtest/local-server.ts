// Without --url the load test starts the quick-start server itself, as a newcomer would
// (`npm start` with nothing configured: an embedded PostgreSQL inside a fresh DATA_DIR), on a
// free loopback port, with an owner whose password is made up here. It trusts X-Forwarded-For
// from loopback (TRUSTED_PROXIES), so each simulated client is its own address and the per-address
// limits (init 30, license 20 a minute) do not turn the test into a rate-limit test.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, root } from '../bench/lib.js';

export interface LocalServer {
  origin: URL;
  pid: number;
  owner: { username: string; password: string };
  logFile: string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startLocalServer(say: (msg: string) => void): Promise<LocalServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-loadtest-'));
  const port = await freePort();
  // random, plus what the password policy requires (a letter and a digit or symbol) whatever the draw
  const owner = { username: 'loadtest', password: `${randomBytes(12).toString('base64url')}-a1` };
  const logFile = path.join(dir, 'server.log');
  const log = fs.openSync(logFile, 'a');
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: path.join(dir, 'data'),
    DATABASE_URL: '',
    REDIS_URL: '',
    WORKERS: '1',
    TRUSTED_PROXIES: '127.0.0.0/8',
    OWNER_USERNAME: owner.username,
    OWNER_PASSWORD: owner.password,
    LOG_LEVEL: 'warn',
  };
  say(`starting the quick-start server on 127.0.0.1:${port} (embedded PostgreSQL in ${dir}) ...`);
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], {
    cwd: root,
    env,
    stdio: ['ignore', log, log],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    fs.closeSync(log);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const origin = new URL(`http://127.0.0.1:${port}`);
  const deadline = Date.now() + 120_000; // the first start downloads nothing, but initdb takes a while on a busy machine
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const tail = fs.readFileSync(logFile, 'utf8').slice(-2000);
      await stop();
      throw new Error(
        `the quick-start server exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${tail}`,
      );
    }
    try {
      const r = await fetch(new URL('/readyz', origin), { signal: AbortSignal.timeout(2000) });
      if (r.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the quick-start server was not ready within 120 s (log: ${logFile})`);
    }
    await sleep(200);
  }
  return { origin, pid: child.pid!, owner, logFile, stop };
}
