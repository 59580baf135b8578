// Air-gapped machines for the SDK integration tests (docs/air-gapped.md): real `keywarden relay`
// processes in front of pools of the harness app PLAIN, and what the tests need to answer activation
// requests through the dashboard route. Started by startSdkHarness once the server has the routes.
//
// ENV CONTRACT (added to startSdkHarness().env):
//   KW_AIRGAP_CONFIG       keywarden.json of PLAIN with its app_id (what requests, answers and pools name)
//   KW_AIRGAP_APP_ID       PLAIN's id: POST $KW_BASE_URL/api/apps/$KW_AIRGAP_APP_ID/offline-activations
//                          {"request"} with `Authorization: Bearer $KW_OWNER_TOKEN` answers {"response": FILE}
//   KW_AIRGAP_KEYS         comma-separated unused keys of PLAIN (30 days, level 3) for activation requests
//   KW_AIRGAP_RELAY_URL    a relay serving a real pool of PLAIN with KW_AIRGAP_SEATS seats (2)
//   KW_AIRGAP_SEATS        "2"
//   KW_AIRGAP_FORGED_RELAY_URL a relay serving a pool of PLAIN signed by another key under the real kid (the
//                          relay itself was started with that other public key): every SDK must refuse its
//                          leases as offline_invalid / bad_signature
//   KW_AIRGAP_ERROR        set instead of the above when preparing them failed (the airgap tests then fail)
// Each relay is its own process (`src/relay-cli.ts` under tsx) with its own data directory; one harness per
// SDK test file, so the seats are that file's alone. Leases last 15 minutes at the relay: an SDK test sees
// its automatic renewal by running its client with a clock a little under 15 minutes ahead.
import fs from 'node:fs/promises';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, createPrivateKey, createPublicKey, sign } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Api } from './http.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RELAY_CLI = path.join(ROOT, 'src/relay-cli.ts');
const SEATS = 2;
const KEYS = 8;

export interface AirgapHarness {
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Does this server answer activation requests? (404 without the route; 422 for an empty body.) */
export async function serverHasAirgap(api: Api, appId: string): Promise<boolean> {
  const r = await api.post(`/api/apps/${appId}/offline-activations`, {});
  return r.status !== 404;
}

function relayCli(args: string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', RELAY_CLI, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** `keywarden relay id`: this machine's relay id. */
async function relayId(): Promise<string> {
  const child = relayCli(['id']);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0 || !out.trim()) throw new Error(`keywarden relay id exited ${code}`);
  return out.trim();
}

interface Relay {
  url: string;
  child: ChildProcess;
}

/** Starts a relay on a free port of 127.0.0.1 and resolves once it logs relay.listening. */
async function startRelay(dir: string, name: string, pool: string, publicKey: string): Promise<Relay> {
  const poolFile = path.join(dir, `${name}.pool`);
  await fs.writeFile(poolFile, pool + '\n');
  const data = path.join(dir, `${name}-data`);
  const child = relayCli([
    '--pool',
    poolFile,
    '--public-key',
    publicKey,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--data',
    data,
  ]);
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`relay ${name} did not start:\n${out}`)), 60_000);
    const seen = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+)[^\n]*relay\.listening|relay\.listening[^\n]*"port":(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1] ?? m[2]));
      }
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.on('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`relay ${name} exited ${code}:\n${out}`));
    });
  });
  child.removeAllListeners('close');
  return { url: `http://127.0.0.1:${port}`, child };
}

async function stopRelay(r: Relay): Promise<void> {
  if (r.child.exitCode !== null) return;
  const closed = new Promise((resolve) => r.child.once('close', resolve));
  r.child.kill('SIGTERM');
  await closed;
}

/** A pool signed by a key the SDKs do not pin, under the real kid (a forged pool). */
function forgedPool(payload: Record<string, unknown>): { pool: string; publicKey: string } {
  const seed = createHash('sha256').update('keywarden-airgap-harness:forger').digest();
  const privateKey = createPrivateKey({
    key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]),
    format: 'der',
    type: 'pkcs8',
  });
  const head = `kwpool1.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const sig = sign(null, Buffer.from(head, 'ascii'), privateKey).toString('base64url');
  const x = createPublicKey(privateKey).export({ format: 'jwk' }).x!;
  return { pool: `${head}.${sig}`, publicKey: Buffer.from(x, 'base64url').toString('base64') };
}

export async function startAirgapHarness(o: {
  owner: Api;
  dir: string;
  appId: string;
  plainConfig: string;
  published: { kid: string; public_key: string }[];
}): Promise<AirgapHarness> {
  const relays: Relay[] = [];
  try {
    const config = JSON.parse(await fs.readFile(o.plainConfig, 'utf8')) as Record<string, unknown>;
    const configFile = path.join(o.dir, 'keywarden-airgap.json');
    await fs.writeFile(configFile, JSON.stringify({ ...config, app_id: o.appId }, null, 2) + '\n');
    const made = await o.owner.post(`/api/apps/${o.appId}/licenses`, {
      amount: KEYS + 1,
      duration: 30,
      unit: 'days',
      level: 3,
    });
    if (made.status !== 200) throw new Error(`key generation refused: ${made.status} ${JSON.stringify(made.body)}`);
    const keys = made.body as { id: string; key: string }[];
    const poolKey = keys.pop()!;
    const rid = await relayId();
    const issued = await o.owner.post(`/api/licenses/${poolKey.id}/pools`, {
      seats: SEATS,
      valid_days: 30,
      relay_id: rid,
    });
    if (issued.status !== 200) throw new Error(`pool refused: ${issued.status} ${JSON.stringify(issued.body)}`);
    const pool = (issued.body as { pool: string }).pool;
    const payload = JSON.parse(Buffer.from(pool.split('.')[1]!, 'base64url').toString('utf8')) as { kid: string };
    const signer = o.published.find((k) => k.kid === payload.kid);
    if (!signer) throw new Error(`the pool names kid ${payload.kid}, which GET /api/client/keys does not publish`);
    relays.push(await startRelay(o.dir, 'real', pool, signer.public_key));
    const forged = forgedPool(payload);
    relays.push(await startRelay(o.dir, 'forged', forged.pool, forged.publicKey));
    const [real, fake] = relays as [Relay, Relay];
    return {
      env: {
        KW_AIRGAP_CONFIG: configFile,
        KW_AIRGAP_APP_ID: o.appId,
        KW_AIRGAP_KEYS: keys.map((k) => k.key).join(','),
        KW_AIRGAP_RELAY_URL: real.url,
        KW_AIRGAP_SEATS: String(SEATS),
        KW_AIRGAP_FORGED_RELAY_URL: fake.url,
      },
      close: async () => {
        await Promise.all(relays.map(stopRelay));
      },
    };
  } catch (err) {
    await Promise.all(relays.map(stopRelay));
    throw err;
  }
}
