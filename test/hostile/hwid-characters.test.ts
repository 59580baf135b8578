// HWIDs are plain text (docs/protocol.md 11.38): a control or format character (zero-width characters and
// bidirectional marks included) or whitespace at either end answers 422 on `hwid` everywhere a HWID
// is taken, so look-alike spellings can never be new devices (each of which used to get a new trial).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { appFixture, type AppFixture } from '../helpers/fixture.js';

let t: TestServer;
let f: AppFixture;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
  f = await appFixture(t, { trial_hours: 24, offline_days: 3, portal_enabled: true });
});
afterAll(() => t.close());

const BASE = 'workstation-0042';
const BAD = [
  ` ${BASE}`,
  `${BASE} `,
  `${BASE}\t`,
  `\u00a0${BASE}`,
  `work\u200bstation-0042`,
  `\ufeff${BASE}`,
  `work\u202estation-0042`,
  `work\u0007station-0042`,
  `work\u200dstation-0042`,
];

function expect422(r: { status: number; body: any }): void {
  expect(r.status).toBe(422);
  expect(r.body.detail.map((d: { loc: unknown[] }) => d.loc.at(-1))).toContain('hwid');
}

describe('hwid with control, format or surrounding whitespace characters', () => {
  it.each(BAD.map((h) => [JSON.stringify(h), h]))(
    '%s: 422 on license, trial, register and login',
    async (_name, hwid) => {
      const [key] = await f.keys(1);
      const c = f.client();
      const session = await f.session(c);
      expect422(await c.post('/api/client/license', { session, license: key, hwid }));
      expect422(await c.post('/api/client/trial', { session, hwid }));
      expect422(
        await c.post('/api/client/register', { session, license: key, username: 'u1', password: 'pass-1234', hwid }),
      );
      expect422(await c.post('/api/client/login', { session, username: 'u1', password: 'pass-1234', hwid }));
      expect422(await c.post('/api/client/offline', { session, hwid }));
    },
  );

  it('a trial is one per device: look-alike spellings are refused, not new trials', async () => {
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/trial', { session, hwid: BASE })).status).toBe(200);
    for (const hwid of BAD) {
      const s = await f.session(c);
      expect((await c.post('/api/client/trial', { session: s, hwid })).status).toBe(422);
    }
    const again = await f.session(c);
    expect((await c.post('/api/client/trial', { session: again, hwid: BASE.toUpperCase() })).body).toEqual({
      detail: 'Trial already used on this device.',
    });
  });

  it('the dashboard offline issue and the portal refuse them too; inner spaces are fine', async () => {
    const [key] = await f.keys(1);
    const [row] = await f.sql<{ id: string }>(
      `select id from license_keys where app_id = $1 order by created_at desc limit 1`,
      [f.app.id],
    );
    expect422(await f.owner.post(`/api/licenses/${row!.id}/offline`, { hwid: `${BASE}\u200b` }));
    const ok = await f.owner.post(`/api/licenses/${row!.id}/offline`, { hwid: 'My Work PC 0042' });
    expect(ok.status).toBe(200);
    const login = await f.owner.post('/api/portal/login', { api_key: f.app.api_key, license: key }, { token: '' });
    expect(login.status).toBe(200);
    const token = login.body.token as string;
    expect422(await f.owner.call('POST', '/api/portal/reset-hwid', { hwid: ' My Work PC 0042' }, { token }));
    expect422(await f.owner.call('POST', '/api/portal/offline', { hwid: 'My Work PC 0042\u2060' }, { token }));
  });
});
