// The client pipeline for /api/client/*, in PROTOCOL 11.5's order: rate limit -> body (400/413)
// -> session or api_key (401/404) -> request signature (401) -> blacklist (403) -> application
// enabled (403) -> field validation (422) -> the endpoint's own rules. Every reply, errors and
// 429 included, leaves signed (PROTOCOL 4); every call on a known application is audited.
import type { Static, TSchema } from '@sinclair/typebox';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Logger } from 'pino';
import { AppError, rateLimited, validationError } from '../errors.js';
import type { AuditRepository } from '../db/repositories/audit.repository.js';
import type { NonceRepository } from '../db/repositories/nonce.repository.js';
import type { ResponseSigningKey } from '../secrets.js';
import type { CachedApp, ClientAppCache } from '../services/client-app-cache.js';
import type { ClientSessions } from '../services/client-sessions.js';
import type { AuditNote, ClientCall, ClientOutcome } from '../services/client-call.js';
import { consumeOrThrow } from '../services/lockout.js';
import {
  NONCE_FORMAT,
  NONCE_TTL_MS,
  TIMESTAMP_WINDOW_S,
  canonicalRequest,
  encryptBody,
  requestSignatureValid,
  signReply,
} from './client-signing.js';
import { errorReply } from './error-reply.js';
import { DEFAULT_BODY_LIMIT } from './router.js';
import { compile, parseJson } from './validation.js';
import type { IncomingRequest, Reply, RouteHandler } from './types.js';

export interface ClientDeps {
  log: Logger;
  now: () => number;
  apps: ClientAppCache;
  sessions: ClientSessions;
  audit: AuditRepository;
  nonces: NonceRepository;
  signingKey: () => ResponseSigningKey;
}

export interface ClientRouteSpec<S extends TSchema> {
  /** Audit action and log name: `client.init`, `client.heartbeat.start`, ... */
  action: string;
  schema: S;
  limiter?: RateLimiterAbstract;
  /** init finds its app by api_key; every other call by its session. */
  identifiesBy: 'api_key' | 'session';
  /** SPEC: heartbeat endpoints answer exactly `Application disabled`; others the app's disabled_message. */
  disabledDetail: 'message' | 'plain';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * One client route: the gate, then `fn` with a ClientCall of plain data; this transport alone turns
 * the service's outcome into the reply, writes its audit line, encrypts and signs.
 */
export function clientHandler<S extends TSchema>(
  deps: ClientDeps,
  spec: ClientRouteSpec<S>,
  fn: (call: ClientCall<Static<S>>) => Promise<ClientOutcome>,
): RouteHandler {
  const validator = compile(spec.schema);
  return async (req) => {
    let app: CachedApp | null = null;
    let audit: AuditNote = {};
    let reply: Reply;
    try {
      if (spec.limiter) await consumeOrThrow(spec.limiter, req.ip, rateLimited);
      if (req.body === 'too_large') throw new AppError('payload_too_large');
      const raw = parseJson(req.body);
      const obj = isObject(raw) ? raw : {};
      // Only calls carrying a screenshot may use the 4 MiB allowance (PROTOCOL 1).
      if (req.body.byteLength > DEFAULT_BODY_LIMIT && obj.screenshot === undefined)
        throw new AppError('payload_too_large');

      let session: ClientCall<unknown>['session'] = null;
      if (spec.identifiesBy === 'api_key') {
        if (typeof obj.api_key !== 'string' || obj.api_key.length === 0 || obj.api_key.length > 128) {
          throw validationError('api_key', 'api_key is required', 'missing');
        }
        app = await deps.apps.getByApiKey(obj.api_key);
        if (!app) throw new AppError('app_not_found');
      } else {
        const record = await deps.sessions.get(obj.session);
        if (!record) throw new AppError('session_invalid');
        session = { token: obj.session as string, record };
        app = await deps.apps.getById(record.appId);
        if (!app) throw new AppError('app_not_found');
      }

      if (app.row.require_signature) await checkSignature(deps, req, app.row.id, app.row.api_secret);
      if (app.blockedIps.has(req.ip)) throw new AppError('access_denied');
      if (typeof obj.hwid === 'string' && app.blockedHwids.has(obj.hwid.toLowerCase()))
        throw new AppError('access_denied');
      if (!app.row.enabled) {
        throw new AppError(
          'app_disabled',
          spec.disabledDetail === 'message' && app.row.disabled_message ? app.row.disabled_message : undefined,
        );
      }

      const body = validator.parse(raw);
      const result = await fn({ app, session, ip: req.ip, nonce: req.headers['x-nonce'] ?? '', body });
      audit = result.audit;
      if (!result.ok) throw result.error;
      const json = Buffer.from(JSON.stringify(result.body));
      const initIv = typeof obj.init_iv === 'string' && obj.init_iv.length > 0 ? obj.init_iv : undefined;
      reply =
        result.encKey && initIv
          ? {
              status: 200,
              body: encryptBody(json, result.encKey, app.row.api_secret, initIv),
              headers: { 'Content-Type': 'application/json' },
            }
          : { status: 200, body: json, headers: { 'Content-Type': 'application/json' } };
    } catch (err) {
      reply = errorReply(err, deps.log, { action: spec.action });
      if (err instanceof AppError || reply.status < 500) {
        audit.level ??= 'warning';
        audit.detail ??= `${reply.status} ${err instanceof AppError ? (typeof err.detail === 'string' ? err.detail : err.code) : 'validation failed'}`;
      } else {
        audit.level ??= 'error';
        audit.detail ??= reply.status === 503 ? '503 service unavailable' : `${reply.status} internal error`;
      }
    }
    if (app && !audit.skip) {
      deps.audit.write({
        appId: app.row.id,
        action: audit.action ?? spec.action,
        level: audit.level ?? 'info',
        detail: audit.detail ?? 'ok',
        ip: req.ip,
        resellerId: audit.resellerId ?? null,
        ...(audit.screen ? { screen: audit.screen } : {}),
      });
    }
    return signReply(reply, deps.signingKey(), req.method, req.path, req.headers['x-nonce'] ?? '', deps.now());
  };
}

async function checkSignature(deps: ClientDeps, req: IncomingRequest, appId: string, apiSecret: string): Promise<void> {
  const ts = req.headers['x-timestamp'];
  const nonce = req.headers['x-nonce'];
  const sig = req.headers['x-signature'];
  if (!ts || !nonce || !sig || !/^\d{1,12}$/.test(ts) || !NONCE_FORMAT.test(nonce))
    throw new AppError('signature_invalid');
  if (Math.abs(deps.now() / 1000 - Number(ts)) > TIMESTAMP_WINDOW_S) throw new AppError('signature_invalid');
  const body = req.body === 'too_large' ? Buffer.alloc(0) : req.body;
  if (!requestSignatureValid(apiSecret, canonicalRequest(req.method, req.path, ts, nonce, body), sig))
    throw new AppError('signature_invalid');
  // Recorded only once the signature verified, so nobody can burn another client's nonces.
  const now = deps.now();
  if (!(await deps.nonces.claim(appId, nonce, new Date(now + NONCE_TTL_MS), new Date(now))))
    throw new AppError('signature_invalid');
}
