// The portal's API (docs/protocol.md 14.1-14.3). A portal token authenticates from `Authorization: Bearer` or
// the kw_portal cookie (HttpOnly, SameSite=Strict, sent only to /api/portal). Portal tokens and
// dashboard tokens live in different tables: neither opens the other's routes. As on the dashboard,
// a write the cookie authenticates must come from the page's own origin, and sign-in refuses a
// foreign Origin (login CSRF); callers without an Origin (scripts) are not browsers and pass.
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { PlainLine, compile, parseJson } from '../../platform/http/validation.js';
import { jsonReply, type IncomingRequest, type Reply } from '../../platform/http/types.js';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import { consumeOrThrow } from '../../platform/limits/lockout.js';
import { AppError, rateLimited } from '../../errors.js';
import { fromOwnOrigin, headerToken } from '../access/index.js';
import { PORTAL_SESSION_TTL_MS, type PortalLogin, type PortalService } from './portal.service.js';

const PORTAL_COOKIE = 'kw_portal';
const COOKIE_PATH = '/api/portal';

const LoginBody = Type.Union([
  Type.Object(
    { api_key: Type.String({ minLength: 1, maxLength: 64 }), license: Type.String({ minLength: 1, maxLength: 256 }) },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      api_key: Type.String({ minLength: 1, maxLength: 64 }),
      username: Type.String({ minLength: 1, maxLength: 64 }),
      password: Type.String({ minLength: 1, maxLength: 1024 }),
    },
    { additionalProperties: false },
  ),
]);
const ResetBody = Type.Object(
  { hwid: Type.Optional(PlainLine(1, 256)) },
  {
    additionalProperties: false,
  },
);
const OfflineBody = Type.Object({ hwid: PlainLine(1, 256) }, { additionalProperties: false });
const PasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 1024 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

interface PortalRoutesDeps {
  portal: PortalService;
  limiter: RequestLimiter;
  /** PUBLIC_URL and the like: origins a cookie write may also come from. */
  trustedOrigins: ReadonlySet<string>;
}

/** The kw_portal cookie's value; a value that is not valid percent-encoding names no session. */
function cookieToken(headers: Readonly<Record<string, string>>): string | undefined {
  const cookie = headers['cookie'];
  if (!cookie) return undefined;
  for (const part of cookie.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === PORTAL_COOKIE) {
      const raw = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(raw);
      } catch {
        return '';
      }
    }
  }
  return undefined;
}

function cookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return (
    `${PORTAL_COOKIE}=${value}; Path=${COOKIE_PATH}; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}` +
    (secure ? '; Secure' : '')
  );
}

type Session = NonNullable<Awaited<ReturnType<PortalService['authenticate']>>>;

/**
 * The portal customer making a request: 413 -> Origin (cookie writes) -> authentication (401). Other
 * modules serving the portal's customers (air-gapped activation) authenticate through this.
 */
export function portalCaller(portal: Pick<PortalService, 'authenticate'>, trustedOrigins: ReadonlySet<string>) {
  return async (req: IncomingRequest): Promise<{ session: Session; token: string }> => {
    if (req.body === 'too_large') throw new AppError('payload_too_large');
    const fromHeader = headerToken(req.headers);
    const token = fromHeader ?? cookieToken(req.headers);
    if (
      req.method !== 'get' &&
      !fromHeader &&
      token !== undefined &&
      fromOwnOrigin(req.headers, trustedOrigins) !== true
    )
      throw new AppError('cross_site');
    const session = token ? await portal.authenticate(token) : undefined;
    if (!session || !token) throw new AppError('not_authenticated');
    return { session, token };
  };
}

export function portalRoutes(router: Router, { portal, limiter, trustedOrigins }: PortalRoutesDeps): void {
  const login = compile(LoginBody);
  const reset = compile(ResetBody);
  const password = compile(PasswordBody);
  const offline = compile(OfflineBody);

  const caller = portalCaller(portal, trustedOrigins);
  /** 413 -> Origin (cookie writes) -> authentication (401) -> the handler. */
  const authed =
    (fn: (req: IncomingRequest, s: Session, token: string) => Promise<unknown>) =>
    async (req: IncomingRequest): Promise<Reply> => {
      const { session, token } = await caller(req);
      const result = await fn(req, session, token);
      return result && typeof result === 'object' && 'status' in result && 'body' in result
        ? (result as Reply)
        : jsonReply(200, result, { 'Cache-Control': 'no-store' });
    };

  router.add({
    method: 'post',
    path: '/api/portal/login',
    doc: {
      summary: 'Customer sign-in with a license-only key, or an end user name and password',
      tag: 'portal',
      auth: 'none',
      body: LoginBody,
      responses: {
        200: '{"token"}; also sets the kw_portal cookie',
        401: 'Invalid credentials',
        403: 'Customer portal is not enabled for this application.',
        404: 'Application not found',
        429: 'Rate limit exceeded; Too many failed attempts, try again later.',
      },
    },
    handler: async (req) => {
      await consumeOrThrow(limiter, req.ip, rateLimited);
      if (req.body === 'too_large') throw new AppError('payload_too_large');
      if (fromOwnOrigin(req.headers, trustedOrigins) === false) throw new AppError('cross_site');
      const body = login.parse(parseJson(req.body)) as PortalLogin;
      const { token } = await portal.login(body, req.ip);
      const secure = req.headers['x-forwarded-proto'] === 'https';
      return jsonReply(200, { token }, { 'Set-Cookie': cookie(token, PORTAL_SESSION_TTL_MS / 1000, secure) });
    },
  });
  router.add({
    method: 'post',
    path: '/api/portal/logout',
    doc: { summary: 'End this portal sign-in', tag: 'portal', auth: 'portal' },
    handler: authed(async (_req, _s, token) => {
      await portal.logout(token);
      return jsonReply(200, { success: true }, { 'Set-Cookie': cookie('', 0, false) });
    }),
  });
  router.add({
    method: 'get',
    path: '/api/portal/me',
    doc: {
      summary:
        "The customer's license, devices, next possible reset, and the app's offline_days (0 = no offline files)",
      tag: 'portal',
      auth: 'portal',
    },
    handler: authed(async (_req, s) => portal.me(s)),
  });
  router.add({
    method: 'post',
    path: '/api/portal/reset-hwid',
    doc: {
      summary: 'Reset one device ({"hwid"}) or all; ends their live sessions; then a cooldown',
      tag: 'portal',
      auth: 'portal',
      body: ResetBody,
      responses: { 200: '{"success", "next_reset_at"}', 404: 'Device not found', 429: 'Device reset is on cooldown.' },
    },
    handler: authed(async (req, s) => portal.resetDevices(s, reset.parse(parseJson(req.body as Buffer)).hwid, req.ip)),
  });
  router.add({
    method: 'post',
    path: '/api/portal/offline',
    doc: {
      summary: "An offline license file for one of the customer's devices (docs/protocol.md 12.5)",
      tag: 'portal',
      auth: 'portal',
      body: OfflineBody,
      responses: { 200: '{"success", "license_file"}', 403: 'Offline licenses are not enabled for this application.' },
    },
    handler: authed(async (req, s) => portal.offlineFile(s, offline.parse(parseJson(req.body as Buffer)).hwid, req.ip)),
  });
  router.add({
    method: 'post',
    path: '/api/portal/password',
    doc: { summary: "Change an end user's password", tag: 'portal', auth: 'portal', body: PasswordBody },
    handler: authed(async (req, s) => {
      const b = password.parse(parseJson(req.body as Buffer));
      await portal.changePassword(s, b.current_password, b.password, req.ip);
      return { success: true };
    }),
  });
}
