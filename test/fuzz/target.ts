// What the fuzzer aims at: a running server with an owner, an application, keys and an activated
// client session, so generated requests reach past authentication and lookups. Also the server's
// resident memory, read from /proc, for the "RSS stays flat" check.
import fs from 'node:fs';
import { Api } from '../helpers/http.js';
import { ClientApi, hwid } from '../helpers/client.js';
import type { FuzzContext } from './openapi-fuzzer.js';

export async function prepareTarget(
  base: string,
  owner: { username: string; password: string },
): Promise<{ ctx: FuzzContext; doc: any }> {
  const api = await new Api(base).signIn(owner.username, owner.password);
  const app = (await api.post('/apps', { name: 'Fuzz target' })).body;
  const [key] = (await api.post(`/apps/${app.id}/licenses`, { amount: 1, duration: 30 })).body.map(
    (k: { key: string }) => k.key,
  );
  const c = new ClientApi(base);
  const session = (await c.post('/api/client/init', { api_key: app.api_key })).body.session as string;
  await c.post('/api/client/license', { session, license: key, hwid: hwid(99) });
  const doc = await (await fetch(`${base}/api/openapi.json`)).json();
  return {
    doc,
    ctx: { base, token: () => api.token!, appId: app.id, apiKey: app.api_key, session: () => session },
  };
}

/** Resident set size of a process in bytes (Linux). */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}
