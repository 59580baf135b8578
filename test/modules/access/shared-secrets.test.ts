// Several hosts on one database (README "Configuration"): with TWO_FACTOR_KEY and LICENSE_HASH_KEY
// configured alike, a second factor set up through one host signs in through the other, and an API
// token made on one is known on the other. Neither host writes a two-factor key of its own then.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createTestDatabase, startTestServer, type TestServer } from '../../helpers/server.js';
import { totp } from '../../helpers/totp.js';
import { loadConfig } from '../../../src/config.js';
import { loadSecrets } from '../../../src/platform/crypto/secrets.js';

const env = {
  TWO_FACTOR_KEY: randomBytes(32).toString('base64'),
  LICENSE_HASH_KEY: randomBytes(32).toString('base64'),
  RESPONSE_SIGNING_KEY: randomBytes(32).toString('base64'),
};
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  db = await createTestDatabase();
  a = await startTestServer(env, { databaseUrl: db.url });
  b = await startTestServer(env, { databaseUrl: db.url });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await db?.drop();
});

describe('two hosts sharing the keys', () => {
  it('accept each other’s second factor and API tokens', async () => {
    const onA = await new Api(a.base).signIn(OWNER.username, OWNER.password);
    const { secret } = (await onA.post('/api/auth/2fa/setup')).body;
    expect((await onA.post('/api/auth/2fa/enable', { code: totp(secret) })).status).toBe(200);
    const viaB = await new Api(b.base).post('/api/auth/login', { ...OWNER, otp: totp(secret, 1) }, { token: '' });
    expect(viaB.status, JSON.stringify(viaB.body)).toBe(200);
    const tok = (await onA.post('/api/tokens', { name: 'shared', scopes: ['apps:read'] })).body.token;
    expect((await new Api(b.base, tok).get('/api/apps')).status).toBe(200);
    for (const t of [a, b]) expect(fs.existsSync(path.join(t.dataDir, 'secrets', 'two-factor.key'))).toBe(false);
  });

  it('refuses a TWO_FACTOR_KEY that is not 32 bytes', async () => {
    const config = loadConfig({ DATA_DIR: a.dataDir, TWO_FACTOR_KEY: randomBytes(16).toString('base64') });
    await expect(loadSecrets(config)).rejects.toThrow('TWO_FACTOR_KEY must be base64 of 32 bytes');
  });
});

describe('workers of one host starting at once on an empty DATA_DIR', () => {
  it('all read the same complete keys (a key file is never seen half written)', async () => {
    // Between processes the file appears only whole (written under a draft name, then linked); here
    // concurrent loads must agree on one key and leave no draft behind.
    for (let round = 0; round < 5; round++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-secrets-'));
      try {
        const config = loadConfig({ DATA_DIR: dir });
        const all = await Promise.all(Array.from({ length: 8 }, () => loadSecrets(config)));
        const keys = new Set(all.map((s) => Buffer.from(s.signing.publicKey).toString('hex')));
        expect(keys.size).toBe(1);
        expect(fs.readdirSync(path.join(dir, 'secrets')).every((f) => !/\.\d+\.[0-9a-f]+$/.test(f))).toBe(true);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});
