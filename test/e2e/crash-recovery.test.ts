// A server SIGKILLed between claim and finalise must not leave the key pending.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { createTestDatabase } from '../helpers/server.js';
import pg from 'pg';

const root = path.resolve(import.meta.dirname, '../..');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-crash-'));
let db: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function serve(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], {
    cwd: root,
    env: {
      ...process.env, DATA_DIR: dataDir, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info',
      OWNER_USERNAME: 'crash', OWNER_PASSWORD: 'crash-pass-1', REDIS_URL: '', ...env,
    },
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const port = new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /"port":(\d+)[^\n]*"msg":"server.listening"/.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    void exited.then(() => reject(new Error(`server exited early: ${buf}`)));
  });
  return { child, port, exited };
}

async function keyStatus(): Promise<string> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    return (await c.query('select status from license_keys')).rows[0]?.status;
  } finally {
    await c.end();
  }
}

describe('crash between claim and finalise', () => {
  it('the key is recovered on the next start and can be registered', async () => {
    const first = serve({ FAULT_AFTER_CLAIM_MS: '600000' });
    const base = `http://127.0.0.1:${await first.port}`;
    const owner = await new Api(base).signIn('crash', 'crash-pass-1');
    const app = (await owner.post('/apps', { name: 'Crashy' })).body;
    const [key] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body.map((k: { key: string }) => k.key);
    const c = new ClientApi(base);
    const session = (await c.post('/api/client/init', { api_key: app.api_key })).body.session;
    const hanging = c.post('/api/client/register', { session, username: 'ghost', password: 'pw-ghost-1', license: key, hwid: hwid() }).catch((e: unknown) => e);
    for (let i = 0; i < 300 && (await keyStatus()) !== 'pending'; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await keyStatus()).toBe('pending');
    first.child.kill('SIGKILL');
    await first.exited;
    await hanging;

    const second = serve({});
    try {
      const base2 = `http://127.0.0.1:${await second.port}`;
      expect(await keyStatus()).toBe('unused');
      const c2 = new ClientApi(base2);
      const s2 = (await c2.post('/api/client/init', { api_key: app.api_key })).body.session;
      const r = await c2.post('/api/client/register', { session: s2, username: 'ghost', password: 'pw-ghost-1', license: key, hwid: hwid() });
      expect(r.status).toBe(200);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });
});
