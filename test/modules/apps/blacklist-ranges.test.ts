// Blacklist ranges and reasons (docs/protocol.md 15.4): an `ip` entry may be a CIDR range, IPv4 or IPv6, and
// blocks every address inside it on the client path (403); entries keep a reason of up to 500 characters.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1' });
});
afterAll(() => t.close());

describe('blacklist ranges', () => {
  it('blocks every client address inside an IPv4 or IPv6 range, and none outside', async () => {
    const f = await appFixture(t);
    const init = async (ip: string) =>
      (await f.client(ip).post('/api/client/init', { api_key: f.app.api_key, version: f.app.version })).status;
    expect(await init('100.64.3.9')).toBe(200);
    const v4 = await f.owner.post(`/api/apps/${f.app.id}/bans`, {
      type: 'ip',
      value: '100.64.3.77/22',
      reason: 'carrier-grade NAT abuse',
    });
    expect(v4.status).toBe(200);
    expect(v4.body).toMatchObject({ type: 'ip', value: '100.64.0.0/22', reason: 'carrier-grade NAT abuse' });
    const v6 = await f.owner.post(`/api/apps/${f.app.id}/bans`, { type: 'ip', value: '2001:DB8:AB::/48' });
    expect(v6.body).toMatchObject({ value: '2001:db8:ab::/48', reason: '' });
    for (const ip of ['100.64.0.1', '100.64.3.9', '100.64.3.255', '2001:db8:ab::1', '2001:db8:ab:ffff::9'])
      expect(await init(ip), ip).toBe(403);
    for (const ip of ['100.64.4.0', '100.63.255.255', '2001:db8:ac::1', '198.51.100.4'])
      expect(await init(ip), ip).toBe(200);
    const list = (await f.owner.get(`/api/apps/${f.app.id}/bans`)).body;
    expect(list.map((b: any) => [b.value, b.reason]).sort()).toEqual([
      ['100.64.0.0/22', 'carrier-grade NAT abuse'],
      ['2001:db8:ab::/48', ''],
    ]);
    // Removing the range lets its addresses back in at once.
    expect((await f.owner.delete(`/api/bans/${v4.body.id}`)).status).toBe(200);
    expect(await init('100.64.3.9')).toBe(200);
  });

  it('validates ranges and reasons; adding an entry again updates its reason', async () => {
    const f = await appFixture(t);
    const ban = (body: Record<string, unknown>) => f.owner.post(`/api/apps/${f.app.id}/bans`, body);
    for (const value of ['10.0.0.0/33', '2001:db8::/129', '10.0.0.0/', 'nope/8'])
      expect((await ban({ type: 'ip', value })).status, value).toBe(422);
    const long = await ban({ type: 'hwid', value: 'abc', reason: 'x'.repeat(501) });
    expect(long.status).toBe(422);
    expect(long.body.detail[0].loc).toEqual(['body', 'reason']);
    const first = await ban({ type: 'hwid', value: 'abc', reason: 'x'.repeat(500) });
    expect(first.status).toBe(200);
    const again = await ban({ type: 'hwid', value: 'ABC', reason: 'chargeback' });
    expect(again.body).toMatchObject({ id: first.body.id, reason: 'chargeback' });
    const logs = (await f.owner.get(`/api/apps/${f.app.id}/logs?action=blacklist.add`)).body;
    expect(logs[0].detail).toBe('hwid abc blacklisted: chargeback');
  });
});
