// Starts `keywarden serve` as a real child process and waits for it to listen.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

export interface ServerProcess {
  child: ChildProcessWithoutNullStreams;
  base: string;
  port: number;
  output: string[];
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * The server while it starts: await it for the listening ServerProcess. Its stop() works before
 * that too, so a caller whose start timed out (a beforeAll hook timeout) can still end the child:
 *   starting = spawnServer(env); server = await starting;   // afterAll: await starting?.stop('SIGKILL')
 */
export type StartingServer = Promise<ServerProcess> & Pick<ServerProcess, 'child' | 'stop'>;

export function spawnServer(
  env: Record<string, string>,
  /**
   * `prefix`: a command that runs the server (e.g. `ip netns exec <ns>`); `host`: the address of its base
   * URL; `root`: another checkout to run (a previous release), default this one.
   */
  o: { prefix?: string[]; host?: string; root?: string } = {},
): StartingServer {
  const dir = o.root ?? root;
  const argv = [...(o.prefix ?? []), process.execPath, '--import', 'tsx', path.join(dir, 'src/cli.ts'), 'serve'];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: dir,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', REDIS_URL: '', ...env },
  });
  const output: string[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  const listening = new Promise<ServerProcess>((resolve, reject) => {
    let buf = '';
    child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        output.push(line);
        const m = /"port":(\d+)[^\n]*"msg":"server.listening"/.exec(line);
        if (m) {
          const port = Number(m[1]);
          resolve({ child, port, base: `http://${o.host ?? '127.0.0.1'}:${port}`, output, exited, stop });
        }
      }
    });
    void exited.then((code) => reject(new Error(`server exited (${code}) before listening:\n${output.join('\n')}`)));
  });
  return Object.assign(listening, { child, stop });
}

/**
 * A port free now on 127.0.0.1, for a server this test starts later. Drawn below Linux's ephemeral
 * range (32768-60999 by default): the kernel hands ports of that range to every outgoing connection
 * and every listen(0), so one chosen there can be taken by any socket opened in between (a CI run once
 * lost an affinity port that way). Below it only an explicit bind can take it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  return listenPort(0);
}

function canListen(port: number): Promise<boolean> {
  return listenPort(port).then(
    () => true,
    () => false,
  );
}

function listenPort(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => {
      const bound = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(bound));
    });
  });
}
