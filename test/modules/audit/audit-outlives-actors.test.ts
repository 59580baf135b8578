// Audit entries outlive their actors (docs/protocol.md 11.32): an admin creates a token and acts with it, its
// reseller signs in and acts; then the admin deletes the reseller and the owner deletes the admin.
// Every entry the owner saw before it still sees, in GET /api/audit and in the application's log,
// with the actor as recorded and `deleted: true`; the admin above a deleted reseller keeps its view too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

interface Entry {
  id: string;
  action: string;
  actor: { id: string; username: string; deleted?: boolean; token_id?: string } | null;
}

const ids = (entries: Entry[]) => entries.map((e) => e.id).sort();

describe('audit entries outlive their actors', () => {
  it('deleting a reseller, then its admin, keeps every entry for those who saw it, actors marked deleted', async () => {
    const owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    const appId = (await owner.post('/api/apps', { name: 'Outlived' })).body.id as string;
    const adminId = (
      await owner.post('/api/team', {
        username: 'gone-admin',
        password: 'admin-pass-1',
        role: 'admin',
        allowed_apps: [appId],
      })
    ).body.id as string;
    const admin = await new Api(t.base).signIn('gone-admin', 'admin-pass-1');
    const token = await admin.post('/api/tokens', { name: 'ci', scopes: ['licenses:write', 'licenses:read'] });
    expect(token.status).toBe(201);
    const viaToken = new Api(t.base, token.body.token as string);
    expect((await viaToken.post(`/api/apps/${appId}/licenses`, { amount: 1, duration: 1 })).status).toBe(200);
    const resellerId = (
      await admin.post('/api/team', {
        username: 'gone-seller',
        password: 'seller-pass-1',
        allowed_apps: [appId],
        permissions: { generate_keys: true },
      })
    ).body.id as string;
    const reseller = await new Api(t.base).signIn('gone-seller', 'seller-pass-1');
    expect((await reseller.post(`/api/apps/${appId}/licenses`, { amount: 1, duration: 1 })).status).toBe(200);

    const accountBefore = (await owner.get('/api/audit?limit=500')).body as Entry[];
    const appBefore = (await owner.get(`/api/apps/${appId}/logs?limit=500`)).body as Entry[];
    const adminBefore = (await admin.get('/api/audit?limit=500')).body as Entry[];
    const theirs = (e: Entry) => e.actor?.id === adminId || e.actor?.id === resellerId;
    expect(accountBefore.filter((e) => e.actor?.id === resellerId).length).toBeGreaterThan(0); // its sign-in
    expect(appBefore.filter((e) => e.actor?.token_id).length).toBeGreaterThan(0);

    // The admin deletes its reseller: the admin and the owner keep the reseller's entries.
    expect((await admin.delete(`/api/team/${resellerId}`)).status).toBe(200);
    const adminAfter = (await admin.get('/api/audit?limit=500')).body as Entry[];
    expect(ids(adminAfter.filter((e) => adminBefore.some((b) => b.id === e.id)))).toEqual(ids(adminBefore));
    expect(adminAfter.find((e) => e.actor?.id === resellerId)?.actor).toMatchObject({
      username: 'gone-seller',
      deleted: true,
    });

    // The owner deletes the admin: every entry it saw is still there, actors as recorded.
    expect((await owner.delete(`/api/team/${adminId}`)).status).toBe(200);
    const accountAfter = (await owner.get('/api/audit?limit=500')).body as Entry[];
    const appAfter = (await owner.get(`/api/apps/${appId}/logs?limit=500`)).body as Entry[];
    for (const before of [accountBefore, appBefore]) {
      const after = before === accountBefore ? accountAfter : appAfter;
      const kept = after.filter((e) => before.some((b) => b.id === e.id));
      expect(ids(kept)).toEqual(ids(before));
      for (const e of kept.filter(theirs)) {
        expect(e.actor!.deleted).toBe(true);
        expect(e.actor!.username).toBe(e.actor!.id === adminId ? 'gone-admin' : 'gone-seller');
      }
    }
    // Living actors are not marked.
    expect(accountAfter.find((e) => e.actor?.username === OWNER.username)?.actor?.deleted).toBeUndefined();
  });
});
