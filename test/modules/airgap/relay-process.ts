// `keywarden relay` as a real child process (src/relay-cli.ts), for the relay tests and the bench.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../../..');
const ENTRY = [process.execPath, '--import', 'tsx', path.join(root, 'src/relay-cli.ts'), 'relay'];

export interface RelayProcess {
  child: ChildProcessWithoutNullStreams;
  base: string;
  output: string[];
  /** Milliseconds from spawn to the relay.listening line. */
  startedInMs: number;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `keywarden relay id` on this machine. */
export function relayIdHere(): string {
  const r = spawnSync(ENTRY[0]!, [...ENTRY.slice(1), 'id'], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

/** A relay that must refuse to start: its exit status and what it printed. */
export function relayRefusal(args: string[]): { status: number | null; text: string } {
  const r = spawnSync(ENTRY[0]!, [...ENTRY.slice(1), ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, text: `${r.stdout}${r.stderr}` };
}

export function spawnRelay(args: string[]): Promise<RelayProcess> {
  const t0 = Date.now();
  const child = spawn(ENTRY[0]!, [...ENTRY.slice(1), '--host', '127.0.0.1', '--port', '0', ...args], { cwd: root });
  const output: string[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        output.push(line);
        const m = /"port":(\d+)[^\n]*"msg":"relay.listening"/.exec(line);
        if (m) resolve({ child, base: `http://127.0.0.1:${m[1]}`, output, startedInMs: Date.now() - t0, stop });
      }
    });
    void exited.then((code) => reject(new Error(`relay exited (${code}) before listening:\n${output.join('\n')}`)));
  });
}
