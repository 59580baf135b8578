// Numbers stay in range (docs/protocol.md 11.25): an extend past 9999-12-31 is 422 on `value` and stores
// nothing (so the app's listings and the key's activations keep working), a credits balance past
// int4 is 422 on `amount`, and a crafted cursor is 422 on `cursor`, for owners and resellers alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

async function activated(f: AppFixture): Promise<{ key: string; id: string }> {
  const [key] = await f.keys(1);
  const c = f.client();
  const session = await f.session(c);
  expect((await c.post('/api/client/license', { session, license: key, hwid: hwid('range') })).status).toBe(200);
  const list = await f.owner.get(`/api/apps/${f.app.id}/licenses`);
  return { key: key!, id: list.body.items.find((k: { status: string }) => k.status === 'used').id };
}

const BIG = { value: 87600, unit: 'months' };

describe('expiry stays within 9999-12-31', () => {
  it('an extend past it is 422 on value and changes nothing; listings and activations go on', async () => {
    const f = await appFixture(t);
    const k = await activated(f);
    const first = await f.owner.post(`/api/licenses/${k.id}/extend`, BIG);
    expect(first.status).toBe(200);
    const before = first.body.expires_at;
    const second = await f.owner.post(`/api/licenses/${k.id}/extend`, BIG);
    expect(second.status).toBe(422);
    expect(second.body.detail[0]).toMatchObject({ loc: ['body', 'value'], type: 'value_error' });
    const list = await f.owner.get(`/api/apps/${f.app.id}/licenses`);
    expect(list.status).toBe(200);
    expect(list.body.items.find((x: { id: string }) => x.id === k.id).expires_at).toBe(before);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: k.key, hwid: hwid('range') })).status).toBe(200);
  });

  it('subtracting to before 1970 is 422 on value', async () => {
    const f = await appFixture(t);
    const k = await activated(f);
    const r = await f.owner.post(`/api/licenses/${k.id}/extend`, { ...BIG, subtract: true });
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['body', 'value']);
  });

  it('extend-all past it is 422 on value and extends no key', async () => {
    const f = await appFixture(t);
    await activated(f);
    await activated(f);
    expect((await f.owner.post(`/apps/${f.app.id}/licenses/extend-all`, BIG)).status).toBe(200);
    const before = (await f.owner.get(`/api/apps/${f.app.id}/licenses`)).body.items.map(
      (x: { expires_at: string }) => x.expires_at,
    );
    const r = await f.owner.post(`/apps/${f.app.id}/licenses/extend-all`, BIG);
    expect(r.status).toBe(422);
    expect(r.body.detail[0].loc).toEqual(['body', 'value']);
    const after = await f.owner.get(`/api/apps/${f.app.id}/licenses`);
    expect(after.status).toBe(200);
    expect(after.body.items.map((x: { expires_at: string }) => x.expires_at)).toEqual(before);
  });
});

describe('credits and cursors', () => {
  it('a balance past 2,147,483,647 is 422 on amount and the balance stays', async () => {
    const f = await appFixture(t);
    const r = await f.owner.post('/api/team', {
      username: 'rangeseller',
      password: 'seller-pass-1',
      key_quota: 1_000_000_000,
      allowed_apps: [f.app.id],
      permissions: { view_keys: true },
    });
    expect(r.status).toBe(200);
    expect((await f.owner.post(`/api/team/${r.body.id}/credits`, { amount: 1_000_000_000 })).body.credits).toBe(
      2_000_000_000,
    );
    const over = await f.owner.post(`/api/team/${r.body.id}/credits`, { amount: 1_000_000_000 });
    expect(over.status).toBe(422);
    expect(over.body.detail[0]).toMatchObject({ loc: ['body', 'amount'], type: 'value_error' });
    const team = await f.owner.get('/api/team');
    expect(team.body.find((a: { id: string }) => a.id === r.body.id).credits).toBe(2_000_000_000);
    // Listing cursors: a reseller's crafted cursor is refused like the owner's.
    const seller = await new Api(t.base).signIn('rangeseller', 'seller-pass-1');
    const crafted = [
      ['1', '------------------------------------'],
      ['275760-09-13T00:00:00.000Z', '00000000-0000-4000-8000-000000000000'],
      ['2026-01-01T00:00:00.000Z', 'not-a-uuid-but-36-characters-long!!!'],
      { a: 1 },
      '2026-01-01',
    ].map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'));
    for (const who of [f.owner, seller]) {
      for (const cursor of [...crafted, '%%%', 'bm90IGpzb24']) {
        const res = await who.get(`/api/apps/${f.app.id}/licenses?cursor=${encodeURIComponent(cursor)}`);
        expect(res.status, cursor).toBe(422);
        expect(res.body.detail[0]).toMatchObject({ loc: ['query', 'cursor'] });
      }
    }
    // A cursor the server wrote still pages.
    await f.keys(3);
    const page = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=2`);
    const next = await f.owner.get(`/api/apps/${f.app.id}/licenses?limit=2&cursor=${page.body.next_cursor}`);
    expect(next.status).toBe(200);
    expect(next.body.items).toHaveLength(1);
  });
});
