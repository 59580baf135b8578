// A server SIGKILLed between claim and finalise must not leave the key pending.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { createTestDatabase } from '../helpers/server.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import pg from 'pg';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-crash-'));
let db: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function serve(env: Record<string, string>): Promise<ServerProcess> {
  return spawnServer({
    DATA_DIR: dataDir,
    DATABASE_URL: db.url,
    OWNER_USERNAME: 'crash',
    OWNER_PASSWORD: 'crash-pass-1',
    ...env,
  });
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
    const first = await serve({ FAULT_AFTER_CLAIM_MS: '600000' });
    const base = first.base;
    const owner = await new Api(base).signIn('crash', 'crash-pass-1');
    const app = (await owner.post('/apps', { name: 'Crashy' })).body;
    const [key] = (await owner.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 1 })).body.map(
      (k: { key: string }) => k.key,
    );
    const c = new ClientApi(base);
    const session = (await c.post('/api/client/init', { api_key: app.api_key })).body.session;
    const hanging = c
      .post('/api/client/register', { session, username: 'ghost', password: 'pw-ghost-1', license: key, hwid: hwid() })
      .catch((e: unknown) => e);
    for (let i = 0; i < 300 && (await keyStatus()) !== 'pending'; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await keyStatus()).toBe('pending');
    first.child.kill('SIGKILL');
    await first.exited;
    await hanging;

    const second = await serve({});
    try {
      const base2 = second.base;
      expect(await keyStatus()).toBe('unused');
      const c2 = new ClientApi(base2);
      const s2 = (await c2.post('/api/client/init', { api_key: app.api_key })).body.session;
      const r = await c2.post('/api/client/register', {
        session: s2,
        username: 'ghost',
        password: 'pw-ghost-1',
        license: key,
        hwid: hwid(),
      });
      expect(r.status).toBe(200);
    } finally {
      await second.stop('SIGTERM');
    }
  });
});
