// The realtime channel across real worker processes sharing PostgreSQL and Redis: a ban made on
// worker A reaches clients connected to worker B within a second whichever worker owns their
// sessions; notices and one-channel-per-session hold across workers; and a client whose worker is
// SIGKILLed reconnects to another one and continues its token chain without re-authenticating.
import { createHmac } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import { metric, startCluster, type Cluster } from '../helpers/cluster.js';
import type { ServerProcess } from '../helpers/process.js';
import { redisAvailable } from '../helpers/services.js';
import { openChannel, openLiveChannel, type ChannelClient } from '../helpers/channel-client.js';

const hasRedis = await redisAvailable();
const SYS = 'channel-system-01';
const HASH = 'feedface'.repeat(4);

interface Live {
  session: string;
  ip: string;
  key: string;
  licenseId: string;
  ch: ChannelClient;
  token: string;
  index: number;
}

describe.skipIf(!hasRedis)('realtime channel across three worker processes', () => {
  let cluster: Cluster;
  let workers: ServerProcess[] = [];
  let owner: Api;
  let app: { id: string; api_key: string };
  let keys: string[] = [];
  let ipSeq = 0;

  beforeAll(async () => {
    cluster = await startCluster({ workers: 3, name: 'Channel cluster', keys: 40 });
    ({ workers, owner, app, keys } = cluster);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await cluster?.close();
  });

  function client(w: ServerProcess, ip: string): ClientApi {
    const c = new ClientApi(w.base);
    c.extraHeaders.connection = 'close';
    c.extraHeaders['x-forwarded-for'] = ip;
    return c;
  }

  /** Sessions authenticated through `auth` (in turn), each with a heartbeat on a channel to `via`. */
  async function connect(n: number, auth: ServerProcess | ServerProcess[], via: ServerProcess): Promise<Live[]> {
    const out: Live[] = [];
    const licenses = (await owner.get(`/api/apps/${app.id}/licenses?limit=500`)).body.items as {
      id: string;
      key_preview: string;
    }[];
    for (let i = 0; i < n; i++) {
      const ip = `198.19.${(++ipSeq >> 8) & 255}.${ipSeq & 255}`;
      const key = keys.pop()!;
      const c = client(Array.isArray(auth) ? auth[i % auth.length]! : auth, ip);
      const session = (await c.post('/api/client/init', { api_key: app.api_key })).body.session;
      expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(`ch${ipSeq}`) })).status).toBe(
        200,
      );
      const ch = await openLiveChannel(via.base, session, { ip });
      const start = await ch.call('heartbeat/start', { system_id: SYS });
      expect(start.status).toBe(200);
      const licenseId = licenses.find((l) => l.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`)!.id;
      out.push({ session, ip, key, licenseId, ch, token: start.body.token, index: 0 });
    }
    return out;
  }

  async function beat(l: Live, ch = l.ch): Promise<number> {
    const index = l.index + 1;
    const r = await ch.call('heartbeat', { token: l.token, system_id: SYS, beat_index: index, code_hash: HASH });
    if (r.status === 200) {
      expect(r.body.proof).toBe(
        createHmac('sha256', l.token)
          .update(`kwhb1\n${l.session}\n${index}\n${r.body.new_token}\n${r.body.beat_count}`)
          .digest('base64'),
      );
      l.token = r.body.new_token;
      l.index = index;
    }
    return r.status;
  }

  it('a ban on worker A reaches clients on worker B within a second, whichever worker owns the session', async () => {
    const [a, b, c] = workers as [ServerProcess, ServerProcess, ServerProcess];
    // Nine sessions made through all three workers: owned by each of them in turn.
    const hosted = await Promise.all(workers.map((w) => metric(w, 'keywarden_heartbeat_sessions')));
    const lives = await connect(9, [a, b, c], b);
    const grown = (await Promise.all(workers.map((w) => metric(w, 'keywarden_heartbeat_sessions')))).map(
      (n, i) => n - hosted[i]!,
    );
    expect(grown.filter((n) => n > 0).length, `sessions hosted per worker: ${grown.join(', ')}`).toBeGreaterThan(1);
    for (const l of lives) expect(await beat(l)).toBe(200);
    const latencies: number[] = [];
    for (const l of lives) {
      const revoked = l.ch.next('revoked', 5000);
      const t0 = Date.now();
      expect((await owner.patch(`/api/licenses/${l.licenseId}/ban`, { banned: true })).status).toBe(200); // owner talks to worker A
      expect((await revoked).reason).toBe('license_banned');
      latencies.push(Date.now() - t0);
      expect((await l.ch.closed).code).toBe(4003);
    }
    expect(Math.max(...latencies)).toBeLessThan(1000);
    // Every session ended on its owner: a REST beat through worker C is refused.
    for (const l of lives) {
      const r = await client(c, l.ip).post('/api/client/heartbeat', {
        session: l.session,
        token: l.token,
        system_id: SYS,
        beat_index: l.index + 1,
        code_hash: HASH,
      });
      expect(r.body).toEqual({ detail: 'rejected' });
    }
  });

  it('a notice sent through worker A reaches the clients of every worker', async () => {
    const lives = [
      ...(await connect(1, workers[0]!, workers[0]!)),
      ...(await connect(1, workers[0]!, workers[1]!)),
      ...(await connect(1, workers[0]!, workers[2]!)),
    ];
    expect((await owner.post(`/api/apps/${app.id}/notice`, { message: 'cluster notice' })).status).toBe(200);
    for (const l of lives) expect((await l.ch.next('notice')).message).toBe('cluster notice');
    for (const l of lives) l.ch.close();
  });

  it('one channel per session across workers: a newer connection on C closes the one on B (4001)', async () => {
    const [l] = await connect(1, workers[0]!, workers[1]!);
    const newer = await openChannel(workers[2]!.base, l!.session, { ip: l!.ip });
    expect((await l!.ch.closed).code).toBe(4001);
    expect(await beat(l!, newer)).toBe(200);
    newer.close();
  });

  it('a client piling up calls is closed (1008) once more than 8 wait', async () => {
    const [l] = await connect(1, workers[0]!, workers[1]!);
    const socket = (l!.ch.ws as unknown as { _socket: Socket })._socket;
    socket.cork(); // one write: the server reads them all while the first waits for Redis
    for (let i = 0; i < 20; i++) l!.ch.send({ type: 'call', op: 'heartbeat/start', body: { system_id: SYS } });
    socket.uncork();
    expect(await l!.ch.closed).toEqual({ code: 1008, reason: 'too many calls in flight' });
    expect(await metric(workers[1]!, 'keywarden_cluster_members')).toBe(3); // the worker lives on
  });

  it("survives a SIGKILL of the client's worker: reconnects elsewhere and continues its chain without re-authenticating", async () => {
    const victim = workers[1]!;
    const survivors = [workers[0]!, workers[2]!];
    // Connected to the victim; at least one of them also owned by it (its hosted-session gauge grows).
    const hostedBefore = await metric(victim, 'keywarden_heartbeat_sessions');
    const lives = [...(await connect(2, survivors[0]!, victim)), ...(await connect(2, victim, victim))];
    while ((await metric(victim, 'keywarden_heartbeat_sessions')) === hostedBefore && lives.length < 30)
      lives.push(...(await connect(1, victim, victim)));
    expect(await metric(victim, 'keywarden_heartbeat_sessions')).toBeGreaterThan(hostedBefore);
    for (const l of lives) expect(await beat(l)).toBe(200);
    const stale = lives.map((l) => ({ token: l.token, index: l.index }));
    victim.child.kill('SIGKILL');
    for (const l of lives) expect((await l.ch.closed).code).toBe(1006); // no close frame: the process died
    // Same session, a new key pair, any surviving worker: no init, no license call.
    const t0 = Date.now();
    for (const [i, l] of lives.entries()) {
      l.ch = await openLiveChannel(survivors[i % 2]!.base, l.session, { ip: l.ip });
      expect(await beat(l)).toBe(200); // waits for the failover when the victim owned the session
    }
    expect(Date.now() - t0).toBeGreaterThan(500); // the victim's sessions did wait for their new owner
    for (const [i, l] of lives.entries()) {
      // The beat acknowledged before the kill is durable: replaying it is refused.
      const replay = await l.ch.call('heartbeat', {
        token: stale[i]!.token,
        system_id: SYS,
        beat_index: stale[i]!.index + 1,
        code_hash: HASH,
      });
      expect(replay.body).toEqual({ detail: 'rejected' });
      expect(await beat(l)).toBe(200);
    }
    // Pushes still reach them on their new workers.
    const revoked = lives[0]!.ch.next('revoked', 5000);
    await new Api(survivors[1]!.base, owner.token).patch(`/api/licenses/${lives[0]!.licenseId}/ban`, { banned: true });
    expect((await revoked).reason).toBe('license_banned');
    for (const l of lives.slice(1)) l.ch.close();
    workers = workers.filter((w) => w !== victim);
  }, 60_000);
});
