// A removed device's sessions end on whichever worker owns them (docs/protocol.md 12.1, 14.3), across two real
// worker processes sharing PostgreSQL and Redis: the dashboard removes a device through worker A while
// that device's sessions live on worker B (a REST heartbeat and a realtime channel); they end there,
// the key's other device goes on on both workers, and the portal's reset of every device then ends
// the rest on both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi } from '../helpers/client.js';
import { metric, startCluster, waitFor, type Cluster } from '../helpers/cluster.js';
import type { ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';
import { openLiveChannel, type ChannelClient } from '../helpers/channel-client.js';

const hasRedis = await redisAvailable();
const SYS = 'device-system-01';
const HASH = 'feedface'.repeat(4);

interface Running {
  c: ClientApi;
  session: string;
  token: string;
  index: number;
  ch?: ChannelClient;
}

describe.skipIf(!hasRedis)('device removal across two worker processes', () => {
  let cluster: Cluster;
  let a: ServerProcess;
  let b: ServerProcess;
  let ipSeq = 0;

  beforeAll(async () => {
    cluster = await startCluster({ workers: 2, name: 'Device removal', keys: 1 });
    [a, b] = cluster.workers as [ServerProcess, ServerProcess];
    const r = await cluster.owner.patch(`/apps/${cluster.app.id}`, {
      max_devices: 3,
      portal_enabled: true,
      portal_reset_cooldown_hours: 0,
    });
    expect(r.status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await Promise.all((cluster?.workers ?? []).map((w) => w.stop('SIGTERM')));
    await cluster?.close();
  });

  function client(w: ServerProcess): { c: ClientApi; ip: string } {
    const ip = `198.20.${(++ipSeq >> 8) & 255}.${ipSeq & 255}`;
    const c = new ClientApi(w.base);
    c.extraHeaders.connection = 'close';
    c.extraHeaders['x-forwarded-for'] = ip;
    return { c, ip };
  }

  /**
   * A session drawn and activated on `w` from `device` (so it lives on a shard `w` owns), its
   * heartbeat started there over REST or a channel, and beaten once.
   */
  async function onDevice(w: ServerProcess, device: string, channel = false): Promise<Running> {
    const { c, ip } = client(w);
    const session = (await c.post('/api/client/init', { api_key: cluster.app.api_key })).body.session as string;
    const lic = await c.post('/api/client/license', { session, license: cluster.keys[0], hwid: device });
    expect(lic.status).toBe(200);
    if (channel) {
      const ch = await openLiveChannel(w.base, session, { ip });
      const start = await ch.call('heartbeat/start', { system_id: SYS });
      expect(start.status).toBe(200);
      const r = await ch.call('heartbeat', { token: start.body.token, system_id: SYS, beat_index: 1, code_hash: HASH });
      expect(r.status).toBe(200);
      return { c, session, token: r.body.new_token, index: 1, ch };
    }
    const start = await c.post('/api/client/heartbeat/start', { session, system_id: SYS });
    expect(start.status).toBe(200);
    const x: Running = { c, session, token: start.body.token, index: 0 };
    expect((await beat(x, w)).status).toBe(200);
    return x;
  }

  /** A REST beat through `via` (forwarded to the session's owner when that is the other worker). */
  async function beat(x: Running, via: ServerProcess) {
    const { c } = client(via);
    const r = await c.post('/api/client/heartbeat', {
      session: x.session,
      token: x.token,
      system_id: SYS,
      beat_index: ++x.index,
      code_hash: HASH,
    });
    if (r.status === 200) x.token = r.body.new_token;
    return r;
  }

  /** The session's next beat is refused once its owner has acted on the event (published on the other worker). */
  async function killed(x: Running, via: ServerProcess): Promise<void> {
    const end = Date.now() + 5000;
    for (;;) {
      const r = await beat(x, via);
      if (r.status === 403) return;
      expect(r.status).toBe(200);
      if (Date.now() > end) throw new Error('the session was not killed');
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  it("ends the removed device's sessions on the worker that owns them, and only those", async () => {
    const hosted = (w: ServerProcess) => metric(w, 'keywarden_heartbeat_sessions');
    const removedRest = await onDevice(b, 'cluster-alpha-0001');
    const removedChannel = await onDevice(b, 'CLUSTER-ALPHA-0001', true);
    const keptOnB = await onDevice(b, 'cluster-bravo-0002');
    const keptOnA = await onDevice(a, 'cluster-bravo-0002');
    // Sessions land on shards of the worker that drew them.
    expect([await hosted(a), await hosted(b)]).toEqual([1, 3]);
    const items = (await cluster.owner.get(`/api/apps/${cluster.app.id}/licenses`)).body.items as { id: string }[];
    const id = items[0]!.id;

    const revoked = removedChannel.ch!.next('revoked');
    expect((await cluster.owner.delete(`/api/licenses/${id}/devices/cluster-alpha-0001`)).status).toBe(200);
    expect(await revoked).toMatchObject({ type: 'revoked', reason: 'hwid_reset' });
    await killed(removedRest, a);
    await waitFor(async () => (await hosted(b)) === 1);
    expect((await beat(keptOnB, a)).status).toBe(200);
    expect((await beat(keptOnA, a)).status).toBe(200);
    expect([await hosted(a), await hosted(b)]).toEqual([1, 1]);

    // The portal's reset of every device (through worker A) ends the rest, on both workers.
    const portal = new Api(a.base);
    const headers = { 'x-forwarded-for': '198.20.250.1' };
    const login = await portal.post(
      '/api/portal/login',
      { api_key: cluster.app.api_key, license: cluster.keys[0] },
      { token: '', headers },
    );
    expect(login.status).toBe(200);
    const reset = await portal.post('/api/portal/reset-hwid', {}, { token: login.body.token, headers });
    expect(reset.status).toBe(200);
    await killed(keptOnB, a);
    await killed(keptOnA, a);
    expect([await hosted(a), await hosted(b)]).toEqual([0, 0]);
  });
});
