// The product as a newcomer runs it: the `keywarden` command as a real process, an embedded
// PostgreSQL in DATA_DIR, data kept across restarts, and the shutdown order on SIGTERM.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';

const root = path.resolve(import.meta.dirname, '../..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-e2e-'));
const baseEnv = { DATA_DIR: dataDir, LOG_LEVEL: 'info', DATABASE_URL: '', REDIS_URL: '' };

function keywarden(env: Record<string, string> = {}): Promise<ServerProcess> {
  return spawnServer({ ...baseEnv, ...env } as Record<string, string>);
}

function messages(p: ServerProcess): string[] {
  return p.output.flatMap((l) => {
    try {
      return [(JSON.parse(l) as { msg: string }).msg];
    } catch {
      return [];
    }
  });
}

afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('keywarden command line', () => {
  it('serves with an embedded PostgreSQL, keeps data across a restart, and shuts down in order on SIGTERM', async () => {
    const created = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'owner', 'create', '--username', 'boss', '--password-stdin'],
      {
        cwd: root,
        env: { ...process.env, ...baseEnv, LOG_LEVEL: 'warn' },
        input: 'boss-pass-123\n',
        encoding: 'utf8',
      },
    );
    expect(created.stdout + created.stderr).toContain('owner boss created');
    expect(created.status).toBe(0);

    const first = await keywarden();
    const api = await new Api(first.base).signIn('boss', 'boss-pass-123');
    const app = (await api.post('/apps', { name: 'Durable' })).body;
    await api.post(`/apps/${app.id}/licenses`, { amount: 3, duration: 30 });
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const order = messages(first).filter((m) => m.startsWith('server.') || m.startsWith('db.embedded.'));
    const at = (m: string) => order.lastIndexOf(m);
    const seq = JSON.stringify(order);
    expect(at('server.stopping'), seq).toBeGreaterThan(at('server.listening'));
    expect(at('db.embedded.stopped'), seq).toBeGreaterThan(at('server.stopping'));
    expect(at('server.stopped'), seq).toBeGreaterThan(at('db.embedded.stopped'));
    expect(
      order.filter((m) => m === 'db.embedded.stopped'),
      seq,
    ).toHaveLength(1);

    const second = await keywarden();
    try {
      const again = await new Api(second.base).signIn('boss', 'boss-pass-123');
      const got = await again.get(`/api/apps/${app.id}`);
      expect(got.body).toMatchObject({ name: 'Durable', api_key: app.api_key, stats: { keys: 3 } });
    } finally {
      second.child.kill('SIGINT');
      expect(await second.exited).toBe(0);
    }
  });

  it("never serves on the 20.30 build's JavaScript shim: refused where that build is the one left, ignored where 20.57 loads", () => {
    // UWS_USE_FALLBACK=1 makes the 20.30 package hand out its shim; the 20.57 build has none.
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "import('./src/platform/http/uws-loader.ts').then((m) => console.log(m.uwsBuildInUse()))",
      ],
      {
        cwd: root,
        env: { ...process.env, UWS_USE_FALLBACK: '1' },
        encoding: 'utf8',
      },
    );
    const currentLoads = spawnSync(process.execPath, ['-e', "require('uWebSockets.js')"], { cwd: root }).status === 0;
    if (!currentLoads) {
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(
        'uWebSockets.js 20.30.0: loaded only its slow JavaScript fallback, which Keywarden refuses',
      );
    } else {
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe('current');
    }
  });
});
