// The fuzzer's hostile phase, beside the generated requests of openapi-fuzzer.ts: what one request at
// a time never shows.
//   - Parallel bursts: many requests at once on the same route, wrong credentials on every sign-in
//     route (dashboard password, two-factor code, portal, client login, unknown heartbeat sessions)
//     and concurrent writes and reads of one application.
//   - Lying Content-Lengths on raw sockets (4294967296, 2^53, 1e20, abc, -1, and a length larger than
//     the body after which the client closes): an answer below 500 or a closed connection, never a
//     stored record (docs/protocol.md 11.33).
//   - Credentials revoked while requests using them are in flight and streams (SSE and WebSocket)
//     are open: an API token revoked, a sign-in session logged out (docs/protocol.md 11.35).
// Every answer must be below 500 and arrive within the hang limit; the caller checks that the server
// process stayed up and logged no unhandled rejection or uncaught exception.
import net from 'node:net';
import WebSocket from 'ws';
import { ClientApi, hwid } from '../helpers/client.js';
import { Api } from '../helpers/http.js';
import { totp } from '../helpers/totp.js';
import type { FuzzContext } from './openapi-fuzzer.js';

export interface HostileOptions {
  /** Requests fired at once in every burst. */
  burst: number;
  /** How often the bursts and the revocations are repeated (fresh credentials each time). */
  rounds: number;
  hangMs: number;
  owner: { username: string; password: string };
}

export interface HostileReport {
  failures: string[];
  /** What was seen, by phase and answer ("burst dashboard login 401": 60). */
  outcomes: Map<string, number>;
  requests: number;
}

/** Declared lengths uWebSockets.js refuses or that lie about the body. */
export const LYING_LENGTHS = ['4294967296', '9007199254740992', '1e20', 'abc', '-1'];

const SCOPES = [
  'apps:read',
  'apps:write',
  'licenses:read',
  'licenses:write',
  'users:read',
  'users:write',
  'logs:read',
  'team:read',
  'team:write',
];

export async function hostile(ctx: FuzzContext, opts: HostileOptions): Promise<HostileReport> {
  const report: HostileReport = { failures: [], outcomes: new Map(), requests: 0 };
  const seen = (what: string, outcome: string | number) => {
    const k = `${what} ${outcome}`;
    report.outcomes.set(k, (report.outcomes.get(k) ?? 0) + 1);
  };
  const owner = new Api(ctx.base, ctx.token());

  /** One HTTP call with the hang limit; a 5xx or no answer is a failure. */
  const call = async (what: string, run: (signal: AbortSignal) => Promise<{ status: number }>) => {
    report.requests++;
    try {
      const { status } = await run(AbortSignal.timeout(opts.hangMs));
      seen(what, status);
      if (status >= 500) report.failures.push(`${what}: ${status}`);
    } catch (err) {
      seen(what, 'error');
      report.failures.push(`${what}: ${(err as Error).message}`);
    }
  };
  const fetchStatus = (path: string, init: RequestInit & { token?: string; ip?: string; json?: unknown }) => {
    const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    if (init.ip) headers['x-forwarded-for'] = init.ip;
    if (init.json !== undefined) headers['content-type'] = 'application/json';
    const body = init.json !== undefined ? JSON.stringify(init.json) : init.body;
    return async (signal: AbortSignal) => {
      const res = await fetch(ctx.base + path, { ...init, headers, body: body ?? null, signal });
      await res.arrayBuffer();
      return { status: res.status };
    };
  };
  const burst = (what: string, make: (i: number) => (signal: AbortSignal) => Promise<{ status: number }>) =>
    Promise.all(Array.from({ length: opts.burst }, (_, i) => call(what, make(i))));

  // Targets: the portal on, a member to guess passwords of, one with two-factor sign-in to guess codes of.
  const app = (await owner.get(`/api/apps/${ctx.appId}`)).body as { api_key: string };
  await owner.patch(`/api/apps/${ctx.appId}`, { portal_enabled: true });
  const stamp = Math.random().toString(36).slice(2, 8);
  const member = { username: `burst-${stamp}`, password: 'burst-member-pass-1' };
  await owner.post('/api/team', member);
  const tfa = { username: `burst-tfa-${stamp}`, password: 'burst-member-pass-1' };
  await owner.post('/api/team', tfa);
  const tfaApi = await new Api(ctx.base).signIn(tfa.username, tfa.password);
  const { secret } = (await tfaApi.post('/api/auth/2fa/setup')).body as { secret: string };
  const enabled = await tfaApi.post('/api/auth/2fa/enable', { code: totp(secret) });
  if (enabled.status !== 200) report.failures.push(`two-factor setup: ${enabled.status}`);

  for (let round = 0; round < opts.rounds; round++) {
    // Each round's guesses come from addresses of their own (TRUSTED_PROXIES names 127.0.0.1), so
    // the per-address limits they reach do not lock the fuzzer's own later calls out.
    const ip = (n: number) => `198.51.${100 + round}.${n}`;
    await burst('burst dashboard password', (i) =>
      fetchStatus('/api/auth/login', {
        method: 'POST',
        ip: ip(1),
        json: { username: member.username, password: `wrong-${i}` },
      }),
    );
    await burst('burst two-factor code', (i) =>
      fetchStatus('/api/auth/login', {
        method: 'POST',
        ip: ip(2),
        json: {
          username: tfa.username,
          password: tfa.password,
          otp: String((i * 7919 + round) % 1e6).padStart(6, '0'),
        },
      }),
    );
    await burst('burst portal key', (i) =>
      fetchStatus('/api/portal/login', {
        method: 'POST',
        ip: ip(3),
        json: { api_key: app.api_key, license: `WRONG-${round}-${i}` },
      }),
    );
    await burst('burst portal password', (i) =>
      fetchStatus('/api/portal/login', {
        method: 'POST',
        ip: ip(4),
        json: { api_key: app.api_key, username: 'nobody', password: `wrong-${i}` },
      }),
    );
    const client = new ClientApi(ctx.base);
    client.extraHeaders = { 'x-forwarded-for': ip(5) };
    const session = (await client.post('/api/client/init', { api_key: app.api_key })).body.session as string;
    await burst(
      'burst client login',
      (i) => async () =>
        client.post('/api/client/login', { session, username: 'nobody', password: `wrong-${i}`, hwid: hwid(i) }),
    );
    await burst(
      'burst unknown heartbeat session',
      (i) => async () =>
        client.post('/api/client/heartbeat/start', { session: `unknown-${round}-${i}`, hwid: hwid(i) }),
    );
    // One application, written and read by everyone at once.
    await burst('burst same app', (i) =>
      i % 3 === 0
        ? fetchStatus(`/api/apps/${ctx.appId}/licenses`, {
            method: 'POST',
            token: ctx.token(),
            json: { amount: 1, duration: 1 },
          })
        : i % 3 === 1
          ? fetchStatus(`/api/apps/${ctx.appId}`, { method: 'PATCH', token: ctx.token(), json: { keys_paused: false } })
          : fetchStatus(`/api/apps/${ctx.appId}/licenses`, { method: 'GET', token: ctx.token() }),
    );
  }

  await lyingLengths(ctx, app.api_key, opts, report, seen);

  for (let round = 0; round < opts.rounds; round++) {
    // An API token revoked while its requests are in flight and its streams are open.
    const created = await owner.post('/api/tokens', { name: `fuzz-revoke-${round}`, scopes: SCOPES });
    const token = created.body.token as string;
    await revokeInFlight(`revoked token`, ctx, token, opts, report, call, fetchStatus, () =>
      owner.delete(`/api/tokens/${created.body.id}`),
    );
    // A sign-in session logged out the same way.
    const signedIn = await new Api(ctx.base).signIn(opts.owner.username, opts.owner.password);
    await revokeInFlight(`logged-out session`, ctx, signedIn.token!, opts, report, call, fetchStatus, () =>
      signedIn.post('/api/auth/logout'),
    );
  }
  return report;
}

type Call = (what: string, run: (signal: AbortSignal) => Promise<{ status: number }>) => Promise<void>;
type FetchStatus = (
  path: string,
  init: RequestInit & { token?: string; ip?: string; json?: unknown },
) => (signal: AbortSignal) => Promise<{ status: number }>;

/** Streams open and a burst in flight with `token` while `revoke` runs: below 500, and the streams end. */
async function revokeInFlight(
  what: string,
  ctx: FuzzContext,
  token: string,
  opts: HostileOptions,
  report: HostileReport,
  call: Call,
  fetchStatus: FetchStatus,
  revoke: () => Promise<{ status: number }>,
): Promise<void> {
  const sse = await fetch(`${ctx.base}/api/apps/${ctx.appId}/events`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (sse.status !== 200) report.failures.push(`${what}: the event stream opened with ${sse.status}`);
  const sseEnded = drain(sse, opts.hangMs);
  const ws = new WebSocket(`${ctx.base.replace('http', 'ws')}/api/ws`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const wsClosed = new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('still open'), opts.hangMs * 2);
    ws.once('close', (code) => {
      clearTimeout(timer);
      resolve(`closed ${code}`);
    });
    ws.once('error', (err) => {
      clearTimeout(timer);
      resolve(`error ${err.message}`);
    });
  });
  await new Promise<void>((resolve) => {
    ws.once('open', () => {
      ws.send(JSON.stringify({ type: 'subscribe', app_id: ctx.appId }));
      resolve();
    });
    ws.once('close', () => resolve());
  });

  // Requests keep coming (a burst's worth at once) until the revocation is done and every sender has
  // been answered once after it: some are checked before it, some straddle it, some follow it.
  let answered = 0;
  let revokedAt = 0;
  let quarter!: () => void;
  const quarterAnswered = new Promise<void>((resolve) => (quarter = resolve));
  const sender = async (n: number) => {
    for (let i = 0; i < 50; i++) {
      const after = revokedAt > 0;
      await call(
        `${what} in flight`,
        (n + i) % 2 === 0
          ? fetchStatus(`/api/apps/${ctx.appId}/licenses`, { method: 'GET', token })
          : fetchStatus(`/api/apps/${ctx.appId}/licenses`, {
              method: 'POST',
              token,
              json: { amount: 1, duration: 1 },
            }),
      );
      if (++answered >= opts.burst / 4) quarter();
      if (after) return;
    }
  };
  const senders = Array.from({ length: opts.burst }, (_, n) => sender(n));
  await quarterAnswered;
  const revoked = await revoke();
  revokedAt = Date.now();
  report.requests++;
  if (revoked.status >= 300) report.failures.push(`${what}: revoking answered ${revoked.status}`);
  await Promise.all(senders);
  await call(`${what} after`, fetchStatus('/api/apps', { method: 'GET', token }));
  const sseOutcome = await sseEnded;
  report.outcomes.set(
    `${what} event stream ${sseOutcome}`,
    (report.outcomes.get(`${what} event stream ${sseOutcome}`) ?? 0) + 1,
  );
  if (sseOutcome !== 'ended') report.failures.push(`${what}: the event stream ${sseOutcome}`);
  const wsOutcome = await wsClosed;
  report.outcomes.set(
    `${what} websocket ${wsOutcome}`,
    (report.outcomes.get(`${what} websocket ${wsOutcome}`) ?? 0) + 1,
  );
  if (wsOutcome === 'still open') report.failures.push(`${what}: the WebSocket stayed open`);
  ws.terminate();
}

/** Reads a stream to its end: 'ended', or why not within `hangMs` after the caller stops writing. */
async function drain(res: Response, hangMs: number): Promise<string> {
  const reader = res.body!.getReader();
  // The stream lives until the revocation; the bound is generous and only catches a stream left open.
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void reader.cancel('still open');
  }, hangMs * 2);
  try {
    for (;;) {
      const { done } = await reader.read();
      // A cancelled reader reads as done too: only an end the server made counts.
      if (done) return timedOut ? 'still open' : 'ended';
    }
  } catch (err) {
    return `failed: ${(err as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
}

/** What a raw request with a lying Content-Length got: its status line's code, or how the socket ended. */
function rawRequest(base: string, head: string, body: string, hangMs: number, closeAfter: boolean): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let got = '';
    const done = (outcome: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done(got ? `partial ${got.slice(0, 40)}` : 'no answer'), hangMs);
    socket.on('connect', () => {
      socket.write(head + body);
      if (closeAfter) socket.end(); // half-close: the rest of the declared body never comes
    });
    socket.on('data', (d) => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m) done(m[1]!);
    });
    socket.on('error', () => done(got ? 'reset after data' : 'reset'));
    socket.on('close', () => done(got ? `closed after ${got.slice(0, 12)}` : 'closed'));
  });
}

async function lyingLengths(
  ctx: FuzzContext,
  apiKey: string,
  opts: HostileOptions,
  report: HostileReport,
  seen: (what: string, outcome: string | number) => void,
): Promise<void> {
  const marker = `lying-cl-${Math.random().toString(36).slice(2, 8)}`;
  const targets = [
    { path: '/api/auth/login', auth: false, body: JSON.stringify({ username: 'x', password: 'y' }) },
    { path: '/api/apps', auth: true, body: JSON.stringify({ name: marker }) },
    { path: '/api/client/init', auth: false, body: JSON.stringify({ api_key: apiKey }) },
    { path: '/api/portal/login', auth: false, body: JSON.stringify({ api_key: apiKey, license: 'WRONG' }) },
  ];
  const { host } = new URL(ctx.base);
  const cases: { length: string; closeAfter: boolean }[] = [
    ...LYING_LENGTHS.map((length) => ({ length, closeAfter: false })),
    ...LYING_LENGTHS.map((length) => ({ length, closeAfter: true })),
    { length: 'longer', closeAfter: true },
  ];
  await Promise.all(
    targets.flatMap((t) =>
      cases.map(async (c) => {
        const length = c.length === 'longer' ? String(Buffer.byteLength(t.body) + 100) : c.length;
        const head =
          `POST ${t.path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
          (t.auth ? `Authorization: Bearer ${ctx.token()}\r\n` : '') +
          `Content-Length: ${length}\r\n\r\n`;
        report.requests++;
        const outcome = await rawRequest(ctx.base, head, t.body, opts.hangMs, c.closeAfter);
        const what = `Content-Length ${c.length}${c.closeAfter ? ' then close' : ''} on ${t.path}`;
        seen(`lying length ${t.path}`, outcome);
        // An answer below 500, or a connection the server closed (or that the client's own close ended).
        if (/^5\d\d$/.test(outcome) || outcome === 'no answer' || outcome.startsWith('partial'))
          report.failures.push(`${what}: ${outcome}`);
      }),
    ),
  );
  // No handler acted on a request whose length was a lie: nothing was stored.
  const apps = (await new Api(ctx.base, ctx.token()).get('/api/apps')).body as { name: string }[];
  if (apps.some((a) => a.name === marker)) report.failures.push('a request with a lying Content-Length created an app');
  const health = await fetch(`${ctx.base}/healthz`);
  if (health.status !== 200) report.failures.push(`healthz after the lying lengths: ${health.status}`);
}
