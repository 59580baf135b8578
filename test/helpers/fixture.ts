// Builds an application with keys through the dashboard API, and client sessions against it.
import pg from 'pg';
import { Api } from './http.js';
import { ClientApi } from './client.js';
import { OWNER, type TestServer } from './server.js';

export interface AppFixture {
  app: { id: string; api_key: string; api_secret: string; [k: string]: unknown };
  owner: Api;
  keys(n?: number, body?: Record<string, unknown>): Promise<string[]>;
  /** A client whose requests come from `ip` (the test server trusts 127.0.0.1 as a proxy). */
  client(ip?: string): ClientApi;
  /** init + return the session token. */
  session(c: ClientApi, extra?: Record<string, unknown>): Promise<string>;
  sql<T = any>(text: string, params?: unknown[]): Promise<T[]>;
}

let ipSeq = 1;
/** A fresh client IP per call, so rate limits and lockouts of one test don't touch another. */
export function nextIp(): string {
  const n = ipSeq++;
  return `198.18.${(n >> 8) & 255}.${n & 255}`;
}

export async function appFixture(t: TestServer, settings: Record<string, unknown> = {}): Promise<AppFixture> {
  const owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
  let app = (await owner.post('/apps', { name: `App ${ipSeq}` })).body;
  if (Object.keys(settings).length > 0) {
    const r = await owner.patch(`/apps/${app.id}`, settings);
    if (r.status !== 200) throw new Error(`app settings refused: ${JSON.stringify(r.body)}`);
    app = r.body;
  }
  return {
    app,
    owner,
    async keys(n = 1, body = {}) {
      const r = await owner.post(`/apps/${app.id}/licenses`, { amount: n, duration: 30, unit: 'days', ...body });
      if (r.status !== 200) throw new Error(`key generation refused: ${JSON.stringify(r.body)}`);
      return r.body.map((k: { key: string }) => k.key);
    },
    client(ip = nextIp()) {
      const c = new ClientApi(t.base);
      c.extraHeaders['x-forwarded-for'] = ip;
      return c;
    },
    async session(c, extra = {}) {
      const r = await c.post('/api/client/init', { api_key: app.api_key, version: app.version, ...extra });
      if (r.status !== 200) throw new Error(`init failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.session;
    },
    async sql(text, params = []) {
      const c = new pg.Client({ connectionString: t.databaseUrl });
      await c.connect();
      try {
        return (await c.query(text, params)).rows;
      } finally {
        await c.end();
      }
    },
  };
}
