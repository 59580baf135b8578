// Parallel bursts of wrong credentials (docs/protocol.md 11.31), shared by the one-process and the cluster
// tests: each sends N attempts at once and counts the answers, so a limit checked after the fact
// (every guess in flight checked before the counter moves) shows as more 401s than the limit.
import { expect } from 'vitest';
import { Api } from './http.js';
import { ClientApi, hwid } from './client.js';
import { nextIp } from './fixture.js';

/** How many of each status a burst got. */
export function tally(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

/** Every answer of a burst is `failure` or 429, and at most `limit` are `failure`. */
export function expectLimited(statuses: number[], failure: number, limit: number): void {
  const t = tally(statuses);
  expect(Object.keys(t).map(Number).sort(), JSON.stringify(t)).toEqual([failure, 429].filter((s) => t[s]).sort());
  expect(t[failure] ?? 0, JSON.stringify(t)).toBeLessThanOrEqual(limit);
  expect(t[failure] ?? 0, JSON.stringify(t)).toBeGreaterThan(0);
}

/** Dashboard sign-ins at `bases[i % n]`, from `ip(i)`. */
export function dashboardBurst(
  bases: string[],
  n: number,
  body: (i: number) => Record<string, unknown>,
  ip: (i: number) => string,
): Promise<number[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await new Api(bases[i % bases.length]!).post('/api/auth/login', body(i), {
        token: '',
        headers: { 'x-forwarded-for': ip(i) },
      });
      return r.status;
    }),
  );
}

/** Client logins (each on its own fresh session, opened from a fresh address) at `bases[i % n]`, from `ip(i)`. */
export async function clientLoginBurst(
  bases: string[],
  apiKey: string,
  n: number,
  username: (i: number) => string,
  ip: (i: number) => string,
): Promise<number[]> {
  const calls = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const c = new ClientApi(bases[i % bases.length]!);
      c.extraHeaders['x-forwarded-for'] = nextIp(); // init has its own 30 a minute per address
      const init = await c.post('/api/client/init', { api_key: apiKey, version: '1.0' });
      expect(init.status).toBe(200);
      c.extraHeaders['x-forwarded-for'] = ip(i);
      return { c, session: init.body.session as string };
    }),
  );
  return Promise.all(
    calls.map(
      async ({ c, session }, i) =>
        (await c.post('/api/client/login', { session, username: username(i), password: 'wrong-pass-1', hwid: hwid(i) }))
          .status,
    ),
  );
}

/** A fresh address per attempt (only the name's bucket is in play). */
export const freshIp = (): string => nextIp();
