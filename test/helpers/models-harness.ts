// The licensing models of docs/protocol.md 12 for the SDK integration tests: a second real server (its own
// database and data directory, the harness's signing key) with application MODELS, behind a TCP
// proxy whose control endpoint restarts that server for real. A second server, so that restarting
// it leaves the main harness server and its proxies alone.
//
// ENV CONTRACT (added to startSdkHarness().env only when the main server knows /api/client/trial;
// a server without it answers 404 there and the SDKs skip their docs/protocol.md 12 tests with one line,
// or fail them when KW_REQUIRE_MODELS=1):
//   KW_MODELS_URL          base URL of the proxy in front of the models server (REST and the realtime channel)
//   KW_MODELS_CONTROL_URL  POST <url>/down: shut the server down (the proxy then resets every connection;
//                          answers once it is down); POST <url>/up: start it again on the same database, data
//                          directory and signing key (answers once it serves); POST <url>/ban {"key"}: ban that
//                          key from the dashboard. Each answers 200 {"ok": true} or 500 {"error"}.
//   KW_CONFIG_MODELS       keywarden.json of MODELS, with base_url = KW_MODELS_URL and app_id
//   KW_CONFIG_MODELS_OFF   keywarden.json of MODELS OFF on the same server: every docs/protocol.md 12 field at its
// default                          (trials and offline files off), the place to see trial_disabled and offline_disabled
//   KW_KEYS_MODELS         20 unused keys of MODELS: 30 days, level 3, entitlements ["export", "pro"]
//   KW_MODELS_APP_ID       the application's id (what offline files name)
//   KW_MODELS_PROBE_ADDRESS the X-Forwarded-For every probe of /api/client/trial sends (its own rate-limit budget);
//                          set also while the models are pending (startSdkHarness adds it either way)
//   KW_MODELS_SETTINGS     JSON of the settings below (trial_hours 72, trial_level 2, offline_days 7, grace_hours 1)
//   KW_MODELS_ERROR        set instead of the above when the server has the route but preparing MODELS failed
//                          (the message): the SDKs fail their docs/protocol.md 12 tests with it
// MODELS has hwid_lock on and heartbeat_interval 5. Every docs/protocol.md 12 call goes to the models server, so
// none spends the budgets of the main server's direct callers (the probe comes from its own address).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import net from 'node:net';
import { Api } from './http.js';
import { createTestDatabase, OWNER, startTestServer, type TestServer } from './server.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';

export const MODELS_SETTINGS = { trial_hours: 72, trial_level: 2, offline_days: 7, grace_hours: 1 } as const;
const ENTITLEMENTS = [
  { code: 'export', name: 'Export' },
  { code: 'pro', name: 'Pro' },
];
const KEYS = 20;
/** Where the probes of /api/client/trial come from (X-Forwarded-For), in every SDK's tests too. */
export const PROBE_ADDRESS = '198.51.100.212';

export interface ModelsHarness {
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Does this server serve the licensing models? (404: not yet; anything else: the route exists.) */
export async function serverHasModels(base: string): Promise<boolean> {
  // Its own client address (the harness trusts 127.0.0.1 as a proxy): trial shares license's rate-limit bucket.
  const headers = { 'content-type': 'application/json', 'x-forwarded-for': PROBE_ADDRESS };
  const r = await fetch(`${base}/api/client/trial`, { method: 'POST', headers, body: '{}' });
  await r.arrayBuffer();
  return r.status !== 404;
}

/** A TCP proxy to a port that may come and go: while there is none, connections are reset at once. */
export function restartableProxy() {
  let target: number | undefined;
  const live = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (target === undefined) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target, '127.0.0.1');
    live.add(client).add(upstream);
    const drop = () => {
      live.delete(client);
      live.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  return {
    server,
    point(port: number | undefined) {
      target = port;
      if (port === undefined) for (const s of live) s.resetAndDestroy();
    },
  };
}

const listen = (s: net.Server | http.Server) =>
  new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as net.AddressInfo).port)));
const closeServer = (s: net.Server | http.Server) => new Promise<void>((r) => s.close(() => r()));

export async function startModelsHarness(
  signingSeed: string,
  published: { kid: string; public_key: string }[],
): Promise<ModelsHarness> {
  const db = await createTestDatabase();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kw-models-'));
  const env = { RESPONSE_SIGNING_KEY: signingSeed, TRUSTED_PROXIES: '127.0.0.1' };
  const start = () => startTestServer(env, { databaseUrl: db.url, dataDir });
  let server: TestServer | undefined = await start();
  const proxy = restartableProxy();
  const proxyUrl = `http://127.0.0.1:${await listen(proxy.server)}`;
  proxy.point(Number(new URL(server.base).port));
  let owner = await new Api(server.base).signIn(OWNER.username, OWNER.password);

  const control = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reply = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const act = async () => {
        if (req.url === '/down') {
          proxy.point(undefined);
          await server?.close();
          server = undefined;
        } else if (req.url === '/up') {
          if (!server) server = await start();
          proxy.point(Number(new URL(server.base).port));
          owner = await new Api(server.base).signIn(OWNER.username, OWNER.password);
        } else if (req.url === '/ban') {
          const key = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { key: string }).key;
          const items = (await owner.get(`/api/apps/${appId}/licenses?q=${encodeURIComponent(key.slice(-4))}`)).body
            .items as { id: string; key_preview: string }[];
          const hit = items.find((l) => l.key_preview === `${key.slice(0, 4)}****${key.slice(-4)}`);
          if (!hit) throw new Error('no such key in MODELS');
          const r = await owner.patch(`/api/licenses/${hit.id}/ban`, { banned: true });
          if (r.status !== 200) throw new Error(`ban refused: ${r.status} ${JSON.stringify(r.body)}`);
        } else {
          return reply(404, { error: 'POST /down, /up or /ban' });
        }
        reply(200, { ok: true });
      };
      act().catch((err: Error) => reply(500, { error: err.message }));
    });
  });
  const controlUrl = `http://127.0.0.1:${await listen(control)}`;

  let appId = '';
  const close = async () => {
    await closeServer(control);
    proxy.point(undefined);
    await closeServer(proxy.server);
    await server?.close();
    await db.drop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
  try {
    const expect200 = (what: string, r: { status: number; body: unknown }) => {
      if (r.status !== 200) throw new Error(`MODELS: ${what} answered ${r.status} ${JSON.stringify(r.body)}`);
      return r.body as Record<string, any>;
    };
    const created = expect200('app creation', await owner.post('/apps', { name: 'SDK MODELS' }));
    appId = created.id;
    const app = expect200(
      'settings',
      await owner.patch(`/apps/${appId}`, { hwid_lock: true, heartbeat_interval: 5, ...MODELS_SETTINGS }),
    );
    expect200('entitlements', await owner.put(`/api/apps/${appId}/entitlements`, { entitlements: ENTITLEMENTS }));
    const keys = expect200(
      'key generation',
      await owner.post(`/apps/${appId}/licenses`, {
        amount: KEYS,
        duration: 30,
        unit: 'days',
        level: 3,
        entitlements: ENTITLEMENTS.map((e) => e.code),
      }),
    ) as unknown as { key: string }[];
    const off = expect200('app creation', await owner.post('/apps', { name: 'SDK MODELS OFF' }));
    const offApp = expect200(
      'settings',
      await owner.patch(`/apps/${off.id}`, { hwid_lock: true, heartbeat_interval: 5 }),
    );
    const write = async (name: string, a: Record<string, any>) => {
      const config = {
        ...clientConfig(
          {
            name: a.name,
            apiKey: a.api_key,
            apiSecret: a.api_secret,
            version: a.version,
            requireSignature: a.require_signature,
          },
          published,
          proxyUrl,
        ),
        app_id: a.id,
      };
      const file = path.join(dataDir, name);
      await fs.writeFile(file, JSON.stringify(config, null, 2) + '\n');
      return file;
    };
    const file = await write('keywarden-models.json', app);
    const offFile = await write('keywarden-models-off.json', offApp);
    return {
      env: {
        KW_MODELS_URL: proxyUrl,
        KW_MODELS_CONTROL_URL: controlUrl,
        KW_CONFIG_MODELS: file,
        KW_CONFIG_MODELS_OFF: offFile,
        KW_KEYS_MODELS: keys.map((k) => k.key).join(','),
        KW_MODELS_PROBE_ADDRESS: PROBE_ADDRESS,
        KW_MODELS_APP_ID: appId,
        KW_MODELS_SETTINGS: JSON.stringify(MODELS_SETTINGS),
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The guard of every docs/protocol.md 12 integration test: a reason to skip while the server side is pending
 * (it answers 404 for /api/client/trial), undefined when the tests must run. Throws when they must run
 * but cannot: KW_REQUIRE_MODELS=1 with a pending server, or a server whose MODELS app could not be made.
 */
export async function pendingModels(env: Record<string, string>): Promise<string | undefined> {
  if (!(await serverHasModels(env.KW_BASE_URL!))) {
    if (process.env.KW_REQUIRE_MODELS === '1')
      throw new Error('KW_REQUIRE_MODELS=1 but the server answers 404 for /api/client/trial');
    return 'licensing models pending: the server answers 404 for /api/client/trial';
  }
  if (env.KW_MODELS_ERROR) throw new Error(`the harness could not prepare app MODELS: ${env.KW_MODELS_ERROR}`);
  return undefined;
}
