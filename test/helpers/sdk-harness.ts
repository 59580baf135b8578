// One real Keywarden server prepared for an SDK's integration tests, plus tampering fakes.
//
// ENV CONTRACT (what startSdkHarness().env holds; pass it to the SDK test process):
//   KW_BASE_URL        base URL of the real server, e.g. http://127.0.0.1:41234 (no trailing slash)
//   KW_CONFIG_PLAIN    path of keywarden.json for app PLAIN    (require_signature off; no api_secret in the file)
//   KW_CONFIG_SIGNED   path of keywarden.json for app SIGNED   (require_signature on; file carries api_secret)
//   KW_CONFIG_OUTDATED path of keywarden.json for app OUTDATED (force_update on, app version "2.0",
//                      update_url "https://example.com/download/2.0", update_message "Version 2.0 is out.";
//                      the file says version "1.0", so init answers 426 -> update_required)
//   KW_KEYS_PLAIN      comma-separated unused license keys of PLAIN  (30 keys, 30 days, level 3)
//   KW_KEYS_SIGNED     comma-separated unused license keys of SIGNED (30 keys, 30 days, level 3)
//   KW_KEYS_OUTDATED   (extra) keys of OUTDATED, same shape
//   KW_TAMPER_URLS     JSON object mode -> base URL of a fake that forwards to the real server and
//                      spoils /api/client/* answers:
//                        forged        one body byte flipped, headers kept          -> verification bad_signature
//                        unsigned      X-Response-* headers stripped                -> verification unsigned
//                        replayed      every path answered with an answer recorded at harness start
//                                      (init: a genuine 200 for PLAIN), i.e. another request's nonce
//                                                                                   -> verification bad_signature
//                        foreign_nonce request forwarded with a different X-Nonce    -> verification bad_signature
//                        unknown_kid   re-signed by a foreign key under kid "k9"     -> verification unknown_kid
//                        stale         re-signed by the real key, timestamp 1000 s old -> verification stale
//                        bad_base64    X-Response-Signature "!!notbase64!!"         -> verification bad_base64
//                        bad_proof     heartbeat/start and heartbeat answers carry a wrong `proof`, correctly
//                                      signed; other paths untouched                -> verification bad_proof
//                        bad_beat_proof (extra) like bad_proof, but heartbeat/start is untouched: the heartbeat
//                                      starts and every beat answer fails           -> verification bad_proof
//                        rate_limited  (extra) untouched, but the path's per-IP bucket is spent first: every
//                                      POST gets the server's own signed 429 + Retry-After -> rate_limited
//                      Use them with the PLAIN config and the SDK's baseUrl option (every mode except
//                      bad_proof refuses init already). Each mode has its own client IP at the server.
//   KW_OUTAGE_URL      (extra) base URL of a pass-through proxy (REST only) that plays an outage on request:
//                      POST $KW_OUTAGE_URL/__outage {"ms": n, "ban"?: key} -> 200, then connections are
//                      refused for n ms; meanwhile the server forgets the heartbeat sessions that went
//                      through the proxy (a restart without their state) and, with `ban`, the key is banned
//                      from the dashboard (test/helpers/outage-proxy.ts). Use it with the PLAIN config.
//   KW_CHANNEL_TAMPER_URLS (extra) JSON object mode -> base URL of a TCP proxy in front of the server that
//                      spoils the realtime channel once (test/helpers/channel-tamper-proxy.ts): hello (forged
//                      hello signature -> bad_signature), forge (2nd frame after the hello flipped -> bad_mac),
//                      swap (2nd and 3rd frames swapped -> out_of_order), inject (a frame of the 1st connection
//                      sent on the 2nd -> bad_mac), absent (404: REST only), drop (1st connection cut after
//                      the 3rd frame -> reconnect), pass (nothing spoiled). Each acts on its first channel
//                      connection (inject: the second) and passes later ones: one test per mode per harness.
//   KW_VECTORS_DIR     absolute path of sdk/vectors
//   KW_OWNER_TOKEN     (extra) dashboard bearer token of the owner (e.g. to read /api/apps/{id}/logs)
//   KW_APP_IDS         (extra) JSON {"PLAIN": id, "SIGNED": id, "OUTDATED": id}
//   KW_AIRGAP_*        (extra) air-gapped machines: activation requests and relays, see test/helpers/airgap-harness.ts
//                      (present only once the server has /api/apps/{id}/offline-activations)
//   KW_MODELS_*        (extra) the licensing models of docs/protocol.md 12 on a second server that the tests may
// restart:                      see test/helpers/models-harness.ts (present only once the server has /api/client/trial)
// The server names its worker in every client answer (AFFINITY_ROUTE=sdk: X-Keywarden-Route: sdk-0);
// `affinityEchoes(env)` reads how many calls sent it back (every SDK must).
// All three apps have hwid_lock on, injection_detection on (debugger_detected: true kills the
// heartbeat: 403 rejected -> heartbeat_killed) and heartbeat_interval 5 (beat_interval 5; beating
// faster is fine, only late beats count as drift). Rate limits per client IP: init 30/min; register,
// login, license 20/min each; 10 failed logins/registers lock a username or IP for 15 minutes.
// Direct calls to KW_BASE_URL all come from 127.0.0.1: keep an SDK test file under those budgets.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Api } from './http.js';
import { OWNER, startTestServer, type TestServer } from './server.js';
import { startTamperProxies } from './tamper-proxy.js';
import { startOutageProxy } from './outage-proxy.js';
import { startChannelTamperProxy, type ChannelTamperMode, type ChannelTamperProxy } from './channel-tamper-proxy.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';
import { PROBE_ADDRESS, serverHasModels, startModelsHarness, type ModelsHarness } from './models-harness.js';
import { serverHasAirgap, startAirgapHarness, type AirgapHarness } from './airgap-harness.js';

export interface SdkHarness {
  env: Record<string, string>;
  server: TestServer;
  close(): Promise<void>;
}

const VECTORS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sdk/vectors');
const KEYS_PER_APP = 30;

interface AppSpec {
  label: 'PLAIN' | 'SIGNED' | 'OUTDATED';
  settings: Record<string, unknown>;
  configVersion?: string;
}
const APPS: AppSpec[] = [
  { label: 'PLAIN', settings: { require_signature: false } },
  { label: 'SIGNED', settings: { require_signature: true } },
  {
    label: 'OUTDATED',
    settings: {
      require_signature: false,
      force_update: true,
      version: '2.0',
      update_url: 'https://example.com/download/2.0',
      update_message: 'Version 2.0 is out.',
    },
    configVersion: '1.0',
  },
];

export async function startSdkHarness(): Promise<SdkHarness> {
  const seed = randomBytes(32).toString('base64');
  const server = await startTestServer({
    RESPONSE_SIGNING_KEY: seed,
    TRUSTED_PROXIES: '127.0.0.1',
    AFFINITY_ROUTE: 'sdk',
  });
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kw-sdk-harness-'));
  let proxies: Awaited<ReturnType<typeof startTamperProxies>> | undefined;
  let outage: Awaited<ReturnType<typeof startOutageProxy>> | undefined;
  const channelProxies: ChannelTamperProxy[] = [];
  let models: ModelsHarness | undefined;
  let airgap: AirgapHarness | undefined;
  try {
    const owner = await new Api(server.base).signIn(OWNER.username, OWNER.password);
    const published = (
      (await (await fetch(`${server.base}/api/client/keys`)).json()) as { keys: { kid: string; public_key: string }[] }
    ).keys;
    const env: Record<string, string> = {
      KW_BASE_URL: server.base,
      KW_VECTORS_DIR: VECTORS_DIR,
      KW_OWNER_TOKEN: owner.token!,
    };
    const ids: Record<string, string> = {};
    const apiKeys: Record<string, { api_key: string; version: string }> = {};
    for (const spec of APPS) {
      const created = await owner.post('/apps', { name: `SDK ${spec.label}` });
      if (created.status !== 200)
        throw new Error(`app creation refused: ${created.status} ${JSON.stringify(created.body)}`);
      const patched = await owner.patch(`/apps/${created.body.id}`, {
        hwid_lock: true,
        injection_detection: true,
        heartbeat_interval: 5,
        ...spec.settings,
      });
      if (patched.status !== 200)
        throw new Error(`app settings refused: ${patched.status} ${JSON.stringify(patched.body)}`);
      const app = patched.body as {
        id: string;
        name: string;
        api_key: string;
        api_secret: string;
        version: string;
        require_signature: boolean;
      };
      const keys = await owner.post(`/apps/${app.id}/licenses`, {
        amount: KEYS_PER_APP,
        duration: 30,
        unit: 'days',
        level: 3,
      });
      if (keys.status !== 200) throw new Error(`key generation refused: ${keys.status} ${JSON.stringify(keys.body)}`);
      const config = clientConfig(
        {
          name: app.name,
          apiKey: app.api_key,
          apiSecret: app.api_secret,
          version: spec.configVersion ?? app.version,
          requireSignature: app.require_signature,
        },
        published,
        server.base,
      );
      const file = path.join(dir, `keywarden-${spec.label.toLowerCase()}.json`);
      await fs.writeFile(file, JSON.stringify(config, null, 2) + '\n');
      env[`KW_CONFIG_${spec.label}`] = file;
      env[`KW_KEYS_${spec.label}`] = (keys.body as { key: string }[]).map((k) => k.key).join(',');
      ids[spec.label] = app.id;
      apiKeys[spec.label] = { api_key: app.api_key, version: app.version };
    }
    env.KW_APP_IDS = JSON.stringify(ids);

    proxies = await startTamperProxies(server.base, seed, published[0]?.kid ?? 'k1');
    // Record an answer for every client path through `replayed` now, so that the SDK's very first
    // call there is already answered with another request's (foreign-nonce) response.
    const prime = async (p: string, body: unknown) => {
      const r = await fetch(proxies!.urls.replayed + p, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-nonce': randomBytes(16).toString('base64url') },
        body: JSON.stringify(body),
      });
      await r.arrayBuffer();
    };
    await prime('/api/client/init', { api_key: apiKeys.PLAIN!.api_key, version: apiKeys.PLAIN!.version });
    for (const p of ['register', 'login', 'license', 'heartbeat/start', 'heartbeat', 'heartbeat/stop'])
      await prime(`/api/client/${p}`, {});
    env.KW_TAMPER_URLS = JSON.stringify(proxies.urls);

    outage = await startOutageProxy(server.base, {
      forget: (sessions) => {
        for (const s of sessions) server.server.app.domain.heartbeat.owner.host.remove(s);
      },
      ban: async (key) => {
        const preview = `${key.slice(0, 4)}****${key.slice(-4)}`;
        for (const id of Object.values(ids)) {
          const items = (await owner.get(`/api/apps/${id}/licenses?q=${encodeURIComponent(key.slice(-4))}`)).body
            .items as { id: string; key_preview: string }[];
          const hit = items.find((l) => l.key_preview === preview);
          if (hit) {
            const r = await owner.patch(`/api/licenses/${hit.id}/ban`, { banned: true });
            if (r.status !== 200) throw new Error(`ban refused: ${r.status} ${JSON.stringify(r.body)}`);
            return;
          }
        }
        throw new Error(`no license ${preview} in the harness apps`);
      },
    });
    env.KW_OUTAGE_URL = outage.url;
    const channelUrls: Record<string, string> = {};
    for (const mode of ['hello', 'forge', 'swap', 'inject', 'absent', 'drop', 'pass'] as ChannelTamperMode[]) {
      const proxy = await startChannelTamperProxy(server.base, mode);
      channelProxies.push(proxy);
      channelUrls[mode] = proxy.url;
    }
    env.KW_CHANNEL_TAMPER_URLS = JSON.stringify(channelUrls);
    env.KW_MODELS_PROBE_ADDRESS = PROBE_ADDRESS;
    if (await serverHasModels(server.base)) {
      try {
        models = await startModelsHarness(seed, published);
        Object.assign(env, models.env);
      } catch (err) {
        // Only the docs/protocol.md 12 tests fail on this; everything else still runs.
        env.KW_MODELS_ERROR = (err as Error).message;
      }
    }

    if (await serverHasAirgap(owner, ids.PLAIN!)) {
      try {
        airgap = await startAirgapHarness({
          owner,
          dir,
          appId: ids.PLAIN!,
          plainConfig: env.KW_CONFIG_PLAIN!,
          published,
        });
        Object.assign(env, airgap.env);
      } catch (err) {
        env.KW_AIRGAP_ERROR = (err as Error).message; // only the air-gapped tests fail on this
      }
    }

    const p = proxies;
    const o = outage;
    const m = models;
    const a = airgap;
    return {
      env,
      server,
      async close() {
        await a?.close();
        await m?.close();
        await Promise.all(channelProxies.map((c) => c.close()));
        await o.close();
        await p.close();
        await server.close();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await airgap?.close();
    await models?.close();
    await Promise.all(channelProxies.map((c) => c.close()));
    await outage?.close();
    await proxies?.close();
    await server.close();
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Downloads the application's `svc_sdk_<lang>.zip` as its owner would (GET /api/apps/{id}/sdk/{lang})
 * and unzips it into `dir`; returns the extracted `svc_sdk_<lang>` folder.
 */
export async function downloadSdkZip(env: Record<string, string>, lang: string, dir: string): Promise<string> {
  const appId = (JSON.parse(env.KW_APP_IDS!) as Record<string, string>).PLAIN!;
  const res = await fetch(`${env.KW_BASE_URL}/api/apps/${appId}/sdk/${lang}`, {
    headers: { authorization: `Bearer ${env.KW_OWNER_TOKEN}` },
  });
  if (res.status !== 200) throw new Error(`SDK download answered ${res.status}`);
  const { unzipSync } = await import('fflate');
  for (const [name, data] of Object.entries(unzipSync(new Uint8Array(await res.arrayBuffer())))) {
    await fs.mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await fs.writeFile(path.join(dir, name), data);
  }
  return path.join(dir, `svc_sdk_${lang}`);
}

/**
 * How many client calls sent the harness server's X-Keywarden-Route back (echoed), and how many of
 * those named the worker they reached (all of them: the harness server is one worker).
 */
export async function affinityEchoes(env: Record<string, string>): Promise<{ echoed: number; reached: number }> {
  const text = await (await fetch(`${env.KW_BASE_URL}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { echoed: read('keywarden_affinity_echoed_total'), reached: read('keywarden_affinity_reached_total') };
}
