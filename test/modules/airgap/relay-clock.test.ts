// The relay's HTTP service on a clock the test moves (the process tests cover the rest, restarts
// included): a lease not renewed within 15 minutes is gone and its seat free, and once the pool is
// past valid_until nothing is granted or renewed, and the status page says so.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes, signingKeyFromSeed } from '../../../src/platform/crypto/index.js';
import { signPool } from '../../../src/modules/airgap/pool-file.js';
import { checkPool, startRelay } from '../../../src/modules/airgap/relay/relay.server.js';
import { createClientIpResolver } from '../../../src/platform/http/client-ip.js';
import { createHttpServer, loadUws } from '../../../src/platform/http/uws.js';
import { Api } from '../../helpers/http.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-relay-clock-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const MIN = 60_000;

describe('relay leases over time', () => {
  it('expires unrenewed leases after 15 minutes and grants nothing past valid_until', async () => {
    let now = Date.parse('2026-12-01T10:00:00.000Z');
    const key = signingKeyFromSeed(randomBytes(32));
    const pool = signPool('k1', key.secretKey, {
      app_id: 'app',
      license_id: 'lic',
      relay_id: 'relay-under-test',
      seats: 1,
      level: 1,
      entitlements: [],
      expires_at: null,
      valid_until: new Date(now + 60 * MIN).toISOString(),
      issued_at: new Date(now).toISOString(),
    });
    const payload = checkPool(pool, key.publicKey, 'relay-under-test', now);
    const log = pino({ level: 'silent' });
    const relay = await startRelay({
      server: createHttpServer(loadUws(), { log, resolveIp: createClientIpResolver([]) }),
      pool,
      payload,
      dataDir: path.join(dir, 'data'),
      host: '127.0.0.1',
      port: 0,
      log,
      now: () => now,
    });
    try {
      const api = new Api(`http://127.0.0.1:${relay.port}`);
      const a = await api.post('/relay/v1/leases', { hwid: 'machine-a' });
      expect(a.body.expires_at).toBe(new Date(now + 15 * MIN).toISOString());
      expect((await api.post('/relay/v1/leases', { hwid: 'machine-b' })).status).toBe(409);
      now += 15 * MIN + 1;
      expect((await api.put(`/relay/v1/leases/${a.body.lease_id}`, {})).body).toEqual({ detail: 'Lease not found' });
      expect((await api.get('/relay/v1/status')).body.in_use).toBe(0);
      const b = await api.post('/relay/v1/leases', { hwid: 'machine-b' });
      expect(b.status).toBe(201);
      // Renewed every 14 minutes, the lease lives on: the last renewal 3 minutes before valid_until.
      for (const at of [29, 43, 57]) {
        now = Date.parse(payload.issued_at) + at * MIN;
        expect((await api.put(`/relay/v1/leases/${b.body.lease_id}`, {})).status).toBe(200);
      }
      now = Date.parse(payload.valid_until) + 1000; // the lease has 12 minutes left, the pool none
      expect((await api.put(`/relay/v1/leases/${b.body.lease_id}`, {})).status).toBe(404);
      const late = await api.post('/relay/v1/leases', { hwid: 'machine-c' });
      expect(late.status).toBe(409);
      expect(late.body).toEqual({ detail: 'No seats available' });
      const page = await (await fetch(`http://127.0.0.1:${relay.port}/`)).text();
      expect(page).toContain('expired: no new leases');
    } finally {
      await relay.stop();
    }
  });
});
