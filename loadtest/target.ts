// What the run points at: the deployment (its origin, the app, the key the answers are signed
// with) and the license keys its simulated clients activate. Keys come from a file, or are created
// through the dashboard API with a bearer token (a sign-in token today; an API token is the same
// header) and deleted afterwards with --cleanup. Without --url, a quick-start server of our own.
import fs from 'node:fs';
import os from 'node:os';
import { HttpClient } from './http-client.js';
import { startLocalServer, type LocalServer } from './local-server.js';
import type { Options } from './options.js';

export interface App {
  id?: string;
  apiKey: string;
  apiSecret?: string;
  /** heartbeat_interval as the app sets it (known with a token), seconds */
  interval?: number;
  requireSignature?: boolean;
}

export interface Target {
  origin: URL;
  local?: LocalServer;
  app: App;
  keys: string[];
  /** what the keys are (created here, from a file) */
  keysNote: string;
  publicKey?: { kid: string; key: string };
  /** the deployment's worker processes and cores, where known */
  workers?: number;
  cores?: number;
  http: HttpClient;
  /** deletes what the run created (with --cleanup), signs out, stops our own server */
  release(say: (msg: string) => void): Promise<void>;
}

interface AppRow {
  id: string;
  api_key: string;
  api_secret?: string;
  heartbeat_interval: number;
  /** heartbeat_interval clamped to [5, 300]: what clients are told */
  beat_interval?: number;
  require_signature: boolean;
}

const KEY_BATCH = 500; // the generation endpoint's maximum per call

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** Runs `fn` over items, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

export async function resolveTarget(o: Options, runId: string, say: (msg: string) => void): Promise<Target> {
  const local = o.url ? undefined : await startLocalServer(say);
  const origin = o.url ?? local!.origin;
  const http = new HttpClient(origin, { ca: o.ca, insecure: o.insecure });
  const cleanups: (() => Promise<void>)[] = [];
  const release = async (sayFn: (msg: string) => void) => {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        sayFn(`cleanup: ${(err as Error).message}`);
      }
    }
    http.close();
    await local?.stop();
  };
  try {
    let token = o.token;
    if (local || o.username) {
      const creds = local ? local.owner : { username: o.username!, password: await readStdin() };
      token = (await http.call<{ token: string }>('POST', '/api/auth/login', { body: creds })).token;
      const t = token;
      cleanups.push(async () => void (await http.request('POST', '/api/auth/logout', { token: t })));
    }
    let app: App;
    if (local) {
      // An application of our own; a 5-second beat interval (the shortest) so a 30-second run shows beats.
      const row = await http.call<AppRow>('POST', '/api/apps', { body: { name: `Load test ${runId}` }, token });
      await http.call('PATCH', `/api/apps/${row.id}`, { body: { heartbeat_interval: 5 }, token });
      app = { id: row.id, apiKey: row.api_key, interval: 5, requireSignature: false };
    } else if (token) {
      const rows = await http.call<AppRow[]>('GET', '/api/apps', { token });
      const row = rows.find((r) => r.api_key === o.apiKey);
      if (!row) throw new Error(`no application with api_key ${o.apiKey} is visible to this token`);
      app = {
        id: row.id,
        apiKey: row.api_key,
        apiSecret: o.apiSecret ?? row.api_secret,
        interval: row.beat_interval ?? Math.min(300, Math.max(5, row.heartbeat_interval)),
        requireSignature: row.require_signature,
      };
      if (row.require_signature && !app.apiSecret)
        throw new Error('the app requires signed requests: give --api-secret');
    } else {
      app = { apiKey: o.apiKey!, apiSecret: o.apiSecret };
    }

    let keys: string[];
    let keysNote: string;
    if (o.keysFile) {
      keys = fs
        .readFileSync(o.keysFile, 'utf8')
        .split(/\r?\n/)
        .map((k) => k.trim())
        .filter((k) => k && !k.startsWith('#'));
      if (keys.length === 0) throw new Error(`${o.keysFile} holds no keys (one a line)`);
      if (keys.some((k) => !/^[\x21-\x7e]{1,256}$/.test(k) || k.includes(',')))
        throw new Error(`${o.keysFile}: a key has spaces, commas or control characters`);
      keysNote = `${keys.length} keys from ${o.keysFile}`;
    } else {
      const want = o.keys ?? Math.min(o.capacity ? o.capacity.maxClients : o.clients, 1000);
      const created: { id: string; key: string }[] = [];
      say(`creating ${want} license keys (note "loadtest ${runId}") ...`);
      for (let left = want; left > 0; left -= KEY_BATCH) {
        const batch = await http.call<{ id: string; key: string }[]>('POST', `/api/apps/${app.id}/licenses`, {
          body: { amount: Math.min(KEY_BATCH, left), unit: 'lifetime', note: `loadtest ${runId}` },
          token,
        });
        created.push(...batch);
      }
      keys = created.map((k) => k.key);
      keysNote = `${keys.length} keys created for this run (note "loadtest ${runId}")`;
      if (local) keysNote += ' on the server of its own';
      else keysNote += o.cleanup ? ', deleted when it ends (--cleanup)' : '; they stay (--cleanup deletes them)';
      if (o.cleanup && !local) {
        const t = token;
        cleanups.push(async () => {
          say(`deleting the ${created.length} keys this run created ...`);
          await pool(created, 8, async (k) => {
            const r = await http.request('DELETE', `/api/licenses/${k.id}`, { token: t });
            if (r.status !== 200 && r.status !== 404)
              throw new Error(`DELETE /api/licenses/${k.id} -> HTTP ${r.status}: ${r.text.slice(0, 200)}`);
          });
        });
      }
    }

    let publicKey: Target['publicKey'];
    if (o.verify > 0) {
      if (o.publicKey) {
        publicKey = { kid: o.kid ?? 'k1', key: o.publicKey };
      } else {
        const k = await http.call<{ keys: { kid: string; public_key: string }[] }>('GET', '/api/client/keys');
        const pick = o.kid ? k.keys.find((x) => x.kid === o.kid) : k.keys[0];
        if (!pick) throw new Error(`GET /api/client/keys lists no key${o.kid ? ` with kid ${o.kid}` : ''}`);
        publicKey = { kid: pick.kid, key: pick.public_key };
      }
    }
    return {
      origin,
      local,
      app,
      keys,
      keysNote,
      publicKey,
      http,
      release,
      workers: local ? 1 : o.workers,
      cores: local ? os.cpus().length : o.cores,
    };
  } catch (err) {
    await release(say);
    throw err;
  }
}
