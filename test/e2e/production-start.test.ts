// Production runtime: `npm run build` compiles src/ with tsc into dist/, and `npm start`
// (node scripts/start.mjs) runs that JavaScript with plain node: no TypeScript loader, no esbuild
// process, the server's own SIGTERM handling. Plus the staleness rule of scripts/build.mjs, on a
// small project of its own so a rebuild takes seconds.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/server.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { buildServer, ensureServerBuild, fingerprint, staleReason } from '../../scripts/build.mjs';
import { freePort } from '../helpers/process.js';

const root = path.resolve(import.meta.dirname, '../..');
const hasRedis = await redisAvailable();

/** Every process below `pid` (children, grandchildren...), read from /proc. */
function descendants(pid: number): { pid: number; comm: string; cmdline: string }[] {
  const all = fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        // comm is in parentheses and may hold spaces: the fields after the last ')' are fixed.
        const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        const cmdline = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ');
        return [{ pid: Number(d), ppid, comm, cmdline }];
      } catch {
        return []; // exited meanwhile
      }
    });
  const found: { pid: number; comm: string; cmdline: string }[] = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift()!;
    for (const p of all.filter((x) => x.ppid === parent)) {
      found.push(p);
      queue.push(p.pid);
    }
  }
  return found;
}

/** `node scripts/start.mjs` exactly as `npm start` runs it, resolved once `listeners` servers listen. */
async function startProduction(env: Record<string, string>, listeners: number) {
  const child = spawn(process.execPath, [path.join(root, 'scripts/start.mjs')], {
    cwd: root,
    // NODE_OPTIONS emptied so nothing of the test runner leaks in.
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      HOST: '127.0.0.1',
      REDIS_URL: '',
      LOG_LEVEL: 'info',
      SHUTDOWN_TIMEOUT_MS: '5000',
      ...env,
    },
  });
  const output: string[] = [];
  child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const log = () => output.join('');
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let buf = '';
      child.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        output.push(d.toString());
        const seen = [...buf.matchAll(/"port":(\d+)[^\n]*"msg":"server.listening"/g)];
        if (seen.length >= listeners) resolve(Number(seen[0]![1]));
      });
      void exited.then((code) => reject(new Error(`npm start exited (${code}) before listening:\n${log()}`)));
    });
    return { child, port, exited, log, kill };
  } catch (err) {
    kill();
    throw err;
  }
}

describe('npm run build and npm start', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-prod-'));
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('npm run build compiles src/ into dist/ and stamps it with the fingerprint of the sources', async () => {
    const before = await fingerprint();
    const r = spawnSync('npm', ['run', 'build'], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const after = await fingerprint();
    expect(fs.existsSync(path.join(root, 'dist/src/cli.js'))).toBe(true);
    expect(fs.existsSync(path.join(root, 'dist/src/platform/db/migrations/index.js'))).toBe(true);
    const stamp = JSON.parse(fs.readFileSync(path.join(root, 'dist/.build-stamp'), 'utf8')) as { fingerprint: string };
    // Other work may edit src/ while tsc runs (a shared checkout): the stamp is of the sources the
    // build started from, and dist/ counts as fresh only when nothing changed meanwhile.
    expect([before, after]).toContain(stamp.fingerprint);
    if (before === after) expect(await staleReason()).toBeUndefined();
  }, 180_000);

  it('npm start serves from compiled JavaScript with no esbuild process, and stops cleanly on SIGTERM', async () => {
    const p = await startProduction({ PORT: '0', DATABASE_URL: db.url, DATA_DIR: dataDir }, 1);
    try {
      const base = `http://127.0.0.1:${p.port}`;
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      const openapi = await fetch(`${base}/api/openapi.json`);
      expect(openapi.status).toBe(200);
      expect(((await openapi.json()) as { openapi: string }).openapi).toMatch(/^3\./);

      // The server is this very process (the CLI runs in-process), started without any loader:
      // Node 20 cannot run a .ts file that way, so what answered above is dist/.
      const self = fs.readFileSync(`/proc/${p.child.pid}/cmdline`, 'utf8').split('\0');
      expect(self.filter(Boolean)).toEqual([process.execPath, path.join(root, 'scripts/start.mjs')]);
      const tree = descendants(p.child.pid!);
      expect(
        tree.filter((x) => /esbuild|tsx/.test(`${x.comm} ${x.cmdline}`)),
        JSON.stringify(tree),
      ).toEqual([]);

      p.child.kill('SIGTERM');
      expect(await p.exited, p.log()).toBe(0);
      expect(p.log().indexOf('"msg":"server.stopped"'), p.log()).toBeGreaterThan(
        p.log().indexOf('"msg":"server.stopping"'),
      );
    } finally {
      p.kill();
    }
  }, 180_000);

  it.skipIf(!hasRedis)(
    'with WORKERS=2 the workers run dist/src/cli.js too, and stop with the primary',
    async () => {
      const workersDb = await createTestDatabase();
      const p = await startProduction(
        {
          WORKERS: '2',
          PORT: String(await freePort()),
          DATABASE_URL: workersDb.url,
          DATA_DIR: dataDir,
          REDIS_URL,
          REDIS_PREFIX: `kwprod${Date.now()}:`,
        },
        2,
      );
      try {
        expect((await fetch(`http://127.0.0.1:${p.port}/healthz`)).status).toBe(200);
        const tree = descendants(p.child.pid!);
        const workers = tree.filter((x) => x.cmdline.includes(' worker'));
        expect(
          workers.map((w) => w.cmdline.trim()),
          JSON.stringify(tree),
        ).toEqual([
          `${process.execPath} ${path.join(root, 'dist/src/cli.js')} worker`,
          `${process.execPath} ${path.join(root, 'dist/src/cli.js')} worker`,
        ]);
        expect(
          tree.filter((x) => /esbuild|tsx/.test(`${x.comm} ${x.cmdline}`)),
          JSON.stringify(tree),
        ).toEqual([]);
        // The workers run with the glibc malloc settings (src/supervisor.ts MALLOC_DEFAULTS).
        for (const w of workers) {
          const environ = fs.readFileSync(`/proc/${w.pid}/environ`, 'utf8').split('\0');
          expect(environ).toEqual(expect.arrayContaining(['MALLOC_ARENA_MAX=2', 'MALLOC_TRIM_THRESHOLD_=131072']));
        }
        p.child.kill('SIGTERM');
        expect(await p.exited, p.log()).toBe(0);
        expect(p.log()).toContain('"msg":"cluster.stopped"');
        for (const w of workers) expect(fs.existsSync(`/proc/${w.pid}`)).toBe(false);
      } finally {
        p.kill();
        await workersDb.drop();
      }
    },
    180_000,
  );
});

describe('scripts/build.mjs rebuilds exactly when an input changed', () => {
  // A project of two files with the committed tsconfig.build.json, next to the real node_modules.
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-build-'));
  const logs: string[] = [];
  const log = (m: string) => logs.push(m);
  const run = () =>
    spawnSync(process.execPath, [path.join(project, 'dist/src/cli.js')], {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    }).stdout.trim();
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(project, rel)), { recursive: true });
    fs.writeFileSync(path.join(project, rel), text);
  };

  beforeAll(() => {
    write('package.json', '{"type":"module"}\n');
    write(
      'tsconfig.json',
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: [],
        },
      }),
    );
    fs.copyFileSync(path.join(root, 'tsconfig.build.json'), path.join(project, 'tsconfig.build.json'));
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(project, 'node_modules'));
    write('src/version.ts', "export const VERSION: string = 'one';\n");
    write('src/cli.ts', "import { VERSION } from './version.js';\nconsole.log(VERSION);\n");
  });
  afterAll(() => fs.rmSync(project, { recursive: true, force: true }));

  it('builds when dist/ is missing, then not again while nothing changed', async () => {
    await ensureServerBuild({ root: project, log });
    expect(logs.join('\n')).toContain('no build yet');
    expect(run()).toBe('one');
    logs.length = 0;
    await ensureServerBuild({ root: project, log });
    expect(logs).toEqual([]);
  }, 60_000);

  it('rebuilds after an edit, an added file and a deleted file, even with an old mtime', async () => {
    write('src/version.ts', "export const VERSION: string = 'two';\n");
    fs.utimesSync(path.join(project, 'src/version.ts'), new Date(2000, 0, 1), new Date(2000, 0, 1)); // content decides, not mtime
    expect(await staleReason(project)).toBe('sources changed since the last build');
    await ensureServerBuild({ root: project, log });
    expect(run()).toBe('two');

    write('src/extra.ts', 'export {};\n');
    expect(await staleReason(project)).toBeDefined();
    await ensureServerBuild({ root: project, log });
    fs.rmSync(path.join(project, 'src/extra.ts'));
    expect(await staleReason(project)).toBeDefined();
    await ensureServerBuild({ root: project, log });
    expect(await staleReason(project)).toBeUndefined();
  }, 90_000);

  it('keeps the previous dist/ when the sources do not compile', async () => {
    write('src/version.ts', "export const VERSION: number = 'three';\n");
    await expect(buildServer({ root: project, log })).rejects.toThrow(/tsc -p tsconfig.build.json failed/);
    expect(run()).toBe('two');
    expect(await staleReason(project)).toBe('sources changed since the last build');
  }, 60_000);
});
