import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { decryptEnc } from '../../helpers/client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

describe('POST /api/client/init', () => {
  it('opens a session and returns the app name, version and hwid_lock only', async () => {
    const f = await appFixture(t, { hwid_lock: true, description: 'secret notes' });
    const r = await f
      .client()
      .post('/api/client/init', { api_key: f.app.api_key, version: f.app.version, unknown_field: 1 });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      success: true,
      session: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      app: { name: f.app.name, version: '1.0', hwid_lock: true },
    });
  });

  it.each([
    ['unknown api_key', {}, { api_key: 'f'.repeat(32) }, 404, 'Application not found'],
    [
      'disabled with a message',
      { enabled: false, disabled_message: 'Down for maintenance' },
      {},
      403,
      'Down for maintenance',
    ],
    ['disabled without a message', { enabled: false }, {}, 403, 'Application disabled'],
    ['force_encryption without enc_key', { force_encryption: true }, {}, 400, 'Encryption key required'],
    [
      'hash_check with an unknown hash',
      { hash_check: true },
      { binary_hash: 'ab'.repeat(16) },
      403,
      'Binary hash mismatch',
    ],
    ['hash_check without a hash', { hash_check: true }, {}, 403, 'Binary hash mismatch'],
    [
      'binary_token with a wrong hash',
      {},
      { binary_token: 'tok-1', binary_token_hash: '00'.repeat(32) },
      403,
      'Invalid binary token',
    ],
    ['binary_token without its hash', {}, { binary_token: 'tok-1' }, 403, 'Invalid binary token'],
  ])('%s', async (_name, settings, extra, status, detail) => {
    const f = await appFixture(t, settings);
    const r = await f.client().post('/api/client/init', { api_key: f.app.api_key, ...extra });
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ detail });
  });

  it('426 with the update object when force_update is on and the version differs', async () => {
    const f = await appFixture(t, {
      force_update: true,
      version: '2.0',
      update_url: 'https://example.com/get',
      update_message: 'Grab 2.0',
    });
    const r = await f.client().post('/api/client/init', { api_key: f.app.api_key, version: '1.9' });
    expect(r.status).toBe(426);
    expect(r.body).toEqual({
      detail: { message: 'Grab 2.0', latest_version: '2.0', update_url: 'https://example.com/get', force_update: true },
    });
    const blank = await appFixture(t, { force_update: true, version: '2.0' });
    const r2 = await blank.client().post('/api/client/init', { api_key: blank.app.api_key });
    expect(r2.body.detail.message).toBe('A new version is required.');
  });

  it('a version mismatch without force_update succeeds and writes client.version_mismatch at warning level', async () => {
    const f = await appFixture(t, { version: '3.0' });
    const r = await f.client().post('/api/client/init', { api_key: f.app.api_key, version: '2.9' });
    expect(r.status).toBe(200);
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=client.version_mismatch`)).body;
    expect(logs).toHaveLength(1);
    expect(logs[0].level).toBe('warning');
  });

  it('accepts an allowed hash in any case and a correct binary token', async () => {
    const f = await appFixture(t, { hash_check: true });
    await f.owner.put(`/api/apps/${f.app.id}/hashes`, { hashes: ['ab'.repeat(32)] });
    const token = 'pre-issued-token';
    const mac = createHmac('sha256', f.app.api_secret).update(token).digest('hex');
    const r = await f.client().post('/api/client/init', {
      api_key: f.app.api_key,
      binary_hash: 'AB'.repeat(32),
      binary_token: token,
      binary_token_hash: mac,
    });
    expect(r.status).toBe(200);
  });

  it('encrypts the init response when enc_key and init_iv are sent (docs/protocol.md 5)', async () => {
    const f = await appFixture(t, { force_encryption: true });
    const r = await f
      .client()
      .post('/api/client/init', { api_key: f.app.api_key, enc_key: 'k'.repeat(35), init_iv: 'iv-seed-1' });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(['enc']);
    const plain = decryptEnc(r.body.enc, 'k'.repeat(35), f.app.api_secret, 'iv-seed-1') as {
      success: boolean;
      session: string;
    };
    expect(plain.success).toBe(true);
    expect(plain.session).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('validates field limits with 422', async () => {
    const f = await appFixture(t);
    for (const [field, value] of [
      ['enc_key', 'x'.repeat(36)],
      ['init_iv', 'x'.repeat(65)],
      ['binary_hash', 'x'.repeat(129)],
      ['version', 5],
    ] as const) {
      const r = await f.client().post('/api/client/init', { api_key: f.app.api_key, [field]: value });
      expect(r.status, field).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['body', field]);
    }
    expect((await f.client().post('/api/client/init', {})).status).toBe(422);
  });

  it('allows 30 inits per minute per IP, then 429 with Retry-After (signed like every reply)', async () => {
    const f = await appFixture(t);
    const c = f.client();
    for (let i = 0; i < 30; i++)
      expect((await c.post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200);
    const r = await c.post('/api/client/init', { api_key: f.app.api_key });
    expect(r.status).toBe(429);
    expect(r.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await f.client().post('/api/client/init', { api_key: f.app.api_key })).status).toBe(200); // another IP
  });

  it('answers 400 for malformed JSON and 413 for oversized bodies, signed', async () => {
    const f = await appFixture(t);
    const bad = await f.client().post('/api/client/init', undefined, { rawBody: '{"api_key":' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ detail: 'Malformed JSON body' });
    const big = await f.client().post('/api/client/init', { api_key: f.app.api_key, pad: 'x'.repeat(17 * 1024) });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ detail: 'Payload too large' });
  });

  it('publishes the response-signing key', async () => {
    const r = await fetch(`${t.base}/api/client/keys`);
    const body = await r.json();
    expect(body).toEqual({ keys: [{ kid: 'k1', alg: 'Ed25519', public_key: expect.any(String) }] });
    expect(Buffer.from(body.keys[0].public_key, 'base64')).toHaveLength(32);
  });
});
