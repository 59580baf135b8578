import { BeatBody, InitBody, LicenseBody, LoginBody, RegisterBody, StartBody, StopBody } from './client-requests.js';
import type { AppDeps } from '../../app.js';
import { addressLimiter, type RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import { clientHandler, type ClientDeps } from './client-gate.js';
import { signReply } from '../../platform/http/client-signing.js';
import { SCREENSHOT_BODY_LIMIT } from '../../platform/http/router.js';
import { jsonReply } from '../../platform/http/types.js';

/** What every client call needs (the REST routes here and the realtime channel's calls). */
export function clientDepsOf({ s, domain }: Pick<AppDeps, 's' | 'domain'>): ClientDeps {
  return {
    log: s.log,
    now: () => s.clock.now(),
    apps: domain.appCache,
    sessions: domain.sessions,
    audit: s.repos.audit,
    nonces: s.repos.nonces,
    signingKey: () => s.secrets.signing,
  };
}

export function clientRoutes(app: AppDeps): void {
  const { router, s, domain } = app;
  const { client, heartbeats } = domain;
  const deps = clientDepsOf(app);
  // SPEC Limits / PROTOCOL 11.3: per IP, per endpoint, per minute. Alone, a compact in-process table
  // (16 bytes an address, bounded: issue 13); in a cluster, Redis, shared by every worker.
  const limit = (name: string, points: number): RequestLimiter =>
    addressLimiter(s.coordinator, () => s.clock.now(), name, points);
  const doc = (
    summary: string,
    body:
      | typeof InitBody
      | typeof RegisterBody
      | typeof LoginBody
      | typeof LicenseBody
      | typeof StartBody
      | typeof BeatBody
      | typeof StopBody,
  ) => ({ summary, tag: 'client', auth: 'client' as const, body });

  router.add({
    method: 'post',
    path: '/api/client/init',
    doc: doc('Open a client session', InitBody),
    handler: clientHandler(
      deps,
      {
        action: 'client.init',
        schema: InitBody,
        limiter: limit('init', 30),
        identifiesBy: 'api_key',
        disabledDetail: 'message',
      },
      (c) => client.init(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/register',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: doc('Claim a key and create an end user', RegisterBody),
    handler: clientHandler(
      deps,
      {
        action: 'client.register',
        schema: RegisterBody,
        limiter: limit('register', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => client.register(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/login',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: doc('Log an end user in', LoginBody),
    handler: clientHandler(
      deps,
      {
        action: 'client.login',
        schema: LoginBody,
        limiter: limit('login', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => client.login(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/license',
    bodyLimit: SCREENSHOT_BODY_LIMIT,
    doc: doc('Activate a license key without an account', LicenseBody),
    handler: clientHandler(
      deps,
      {
        action: 'client.license',
        schema: LicenseBody,
        limiter: limit('license', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => client.license(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/heartbeat/start',
    doc: doc('Start a heartbeat session', StartBody),
    handler: clientHandler(
      deps,
      { action: 'client.heartbeat.start', schema: StartBody, identifiesBy: 'session', disabledDetail: 'plain' },
      (c) => heartbeats.start(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/heartbeat',
    doc: doc('One heartbeat', BeatBody),
    handler: clientHandler(
      deps,
      { action: 'client.heartbeat', schema: BeatBody, identifiesBy: 'session', disabledDetail: 'plain' },
      (c) => heartbeats.beat(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/heartbeat/stop',
    doc: doc('Stop a heartbeat session', StopBody),
    handler: clientHandler(
      deps,
      { action: 'client.heartbeat.stop', schema: StopBody, identifiesBy: 'session', disabledDetail: 'plain' },
      (c) => heartbeats.stop(c),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/client/keys',
    doc: { summary: 'Response-signing public keys', tag: 'client', auth: 'none' },
    handler: async (req) =>
      signReply(
        jsonReply(200, {
          keys: s.secrets.publishedKeys.map((k) => ({
            kid: k.kid,
            alg: 'Ed25519',
            public_key: k.publicKey.toString('base64'),
          })),
        }),
        s.secrets.signing,
        req.method,
        req.path,
        req.headers['x-nonce'] ?? '',
        s.clock.now(),
      ),
  });
}
