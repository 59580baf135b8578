// The dashboard pipeline, written once: 413 -> cross-site check (403) -> authentication (401)
// -> reach (404: a record of an application outside the account's, docs/protocol.md 11.36) -> admission
// (403: an API token's scopes and app_ids, the owner's two-factor policy) -> JSON (400) -> schema
// (422) -> handler. Handlers get a typed context and return a value (sent as 200 JSON) or a Reply.
//
// API tokens (`kwt_`, docs/protocol.md 13.1) count only in the Authorization header: one in a cookie is an
// unknown session, and one in a query string is refused (401) before anything else, since a URL
// ends up in proxy logs and browser history.
//
// CSRF: the kw_session cookie is SameSite=Strict, and on top of that a write (POST, PUT, PATCH,
// DELETE) authenticated by the cookie must name its origin: `Origin` (or, when a browser sends
// none, `Referer`) must be the request's own Host or PUBLIC_URL, else 403 `Cross-site request
// refused`. Another site cannot attach a Bearer header (no CORS here), so Bearer calls are not
// checked; the sign-in route refuses a foreign Origin too (login CSRF), while callers that send
// no Origin at all (curl, SDKs) sign in as before.
import type { Static, TSchema } from '@sinclair/typebox';
import { AppError } from '../../errors.js';
import type { Principal } from './principal.js';
import type { CallerOrigin, DashboardAuth } from './auth.service.js';
import { SESSION_COOKIE } from './auth.service.js';
import { TOKEN_PREFIX } from './api-tokens.service.js';
import { compile, parseJson } from '../../platform/http/validation.js';
import { jsonReply, type IncomingRequest, type Reply, type RouteHandler } from '../../platform/http/types.js';

type Maybe<T extends TSchema | undefined> = T extends TSchema ? Static<T> : undefined;

interface DashboardCtx<B extends TSchema | undefined, Q extends TSchema | undefined> {
  req: IncomingRequest;
  principal: Principal;
  body: Maybe<B>;
  query: Maybe<Q>;
  params: Readonly<Record<string, string>>;
}

function isReply(v: unknown): v is Reply {
  return typeof v === 'object' && v !== null && 'status' in v && 'body' in v && 'headers' in v;
}

/** The token of an `Authorization: Bearer` header, if any. */
export function headerToken(headers: Readonly<Record<string, string>>): string | undefined {
  const auth = headers['authorization'];
  return auth && /^bearer /i.test(auth) ? auth.slice(7).trim() : undefined;
}

/** The dashboard token of a request: `Authorization: Bearer`, else the kw_session cookie. */
export function bearerToken(headers: Readonly<Record<string, string>>): string | undefined {
  const fromHeader = headerToken(headers);
  if (fromHeader) return fromHeader;
  const cookie = headers['cookie'];
  if (!cookie) return undefined;
  for (const part of cookie.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = cookieValue(part.slice(eq + 1).trim());
      return value.startsWith(TOKEN_PREFIX) ? '' : value; // an API token in a cookie names no session
    }
  }
  return undefined;
}

/** Refuses an API token carried in a query string (any parameter): 401, the token is not used. */
export function refuseTokenInQuery(query: URLSearchParams): void {
  for (const v of query.values()) if (v.startsWith(TOKEN_PREFIX)) throw new AppError('token_invalid');
}

/** The address and browser of a call (audit entries of sign-ins and account changes). */
export function callerOrigin(req: IncomingRequest): CallerOrigin {
  return { ip: req.ip, userAgent: req.headers['user-agent'] };
}

/**
 * A cookie value, percent-decoded. docs/protocol.md 11.23: a value that is not valid percent-encoding is an
 * unknown session (it is kept as sent, which no token matches), never an exception: this runs
 * synchronously inside uWS handlers, where a throw would end the process.
 */
function cookieValue(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** `host[:port]` without a default port, lower-cased, for comparing a Host header with a URL's host. */
function normalHost(host: string, scheme: string): string {
  const h = host.toLowerCase();
  return (scheme === 'https:' && h.endsWith(':443')) || (scheme === 'http:' && h.endsWith(':80'))
    ? h.replace(/:\d+$/, '')
    : h;
}

/** Whether the request's Origin (else Referer) is its own Host or a trusted origin; undefined when it names none. */
export function fromOwnOrigin(
  headers: Readonly<Record<string, string>>,
  trusted: ReadonlySet<string> | undefined,
): boolean | undefined {
  const source = headers['origin'] ?? headers['referer'];
  if (source === undefined || source === '') return undefined;
  let url: URL;
  try {
    url = new URL(source); // "null" (an opaque origin: sandboxed frame, file:) does not parse: refused
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  if (trusted?.has(url.origin.toLowerCase())) return true;
  const host = headers['host'];
  return host !== undefined && normalHost(host, url.protocol) === normalHost(url.host, url.protocol);
}

/** Query strings arrive as text; integer-typed fields are converted before validation. */
function queryObject(req: IncomingRequest, schema: TSchema): Record<string, unknown> {
  const props = (schema as { properties?: Record<string, { type?: string }> }).properties ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of req.query) {
    const t = props[k]?.type;
    out[k] = t === 'integer' && /^-?\d+$/.test(v) ? Number(v) : v;
  }
  return out;
}

interface DashboardRouteOptions<B extends TSchema | undefined, Q extends TSchema | undefined> {
  auth: DashboardAuth;
  body?: B;
  query?: Q;
  /** false for the sign-in route itself. */
  authenticate?: boolean;
}

export function dashboardHandler<B extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined>(
  opts: DashboardRouteOptions<B, Q>,
  fn: (ctx: DashboardCtx<B, Q>) => Promise<unknown>,
): RouteHandler {
  const body = opts.body ? compile(opts.body) : undefined;
  const query = opts.query ? compile(opts.query) : undefined;
  return async (req) => {
    if (req.body === 'too_large') throw new AppError('payload_too_large');
    if (req.method !== 'get') {
      const own = fromOwnOrigin(req.headers, opts.auth.trustedOrigins);
      // A write the kw_session cookie would authenticate must prove its origin; a sign-in may not name a foreign one.
      const byCookie =
        opts.authenticate !== false && !headerToken(req.headers) && bearerToken(req.headers) !== undefined;
      if ((byCookie && own !== true) || (opts.authenticate === false && own === false))
        throw new AppError('cross_site');
    }
    let principal: Principal | null = null;
    if (opts.authenticate !== false) {
      refuseTokenInQuery(req.query);
      const token = bearerToken(req.headers);
      principal = token ? await opts.auth.authenticate(token, { ip: req.ip }) : null;
      if (!principal) throw new AppError('not_authenticated');
      await opts.auth.reach(principal, req.path);
      opts.auth.admit(principal, req.method, req.path);
    }
    const parsedBody = body ? body.parse(parseJson(req.body)) : undefined;
    const parsedQuery = query ? query.parse(queryObject(req, query.schema), 'query') : undefined;
    const result = await fn({
      req,
      principal: principal as Principal,
      body: parsedBody as Maybe<B>,
      query: parsedQuery as Maybe<Q>,
      params: req.params,
    });
    return isReply(result) ? result : jsonReply(200, result);
  };
}
