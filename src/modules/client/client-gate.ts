// The client pipeline for /api/client/*, in docs/protocol.md 11.5's order: rate limit -> body (400/413)
// -> session or api_key (401/404) -> request signature (401) -> blacklist (403) -> application
// enabled (403) (admission.ts) -> field validation (422) -> the endpoint's own rules. Every reply, errors and
// 429 included, leaves signed (docs/protocol.md 4); every call on a known application is audited.
import type { Static, TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { AppError, rateLimited, validationError } from '../../errors.js';
import type { AuditRepository } from '../audit/index.js';
import type { NonceRepository } from './nonce.repository.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { CachedApp, ClientAppCache } from './client-app-cache.js';
import { refusalOf } from './admission.js';
import type { ClientSession, ClientSessions } from './client-sessions.js';
import type { AuditNote, ClientCall, ClientOutcome } from './client-call.js';
import { consumeNowOrThrow, consumeOrThrow } from '../../platform/limits/lockout.js';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import {
  NONCE_FORMAT,
  NONCE_TTL_MS,
  TIMESTAMP_WINDOW_S,
  canonicalRequest,
  encryptBodyWithKey,
  requestSignatureValid,
  signReply,
} from '../../platform/http/client-signing.js';
import { errorReply } from '../../platform/http/error-reply.js';
import { DEFAULT_BODY_LIMIT } from '../../platform/http/router.js';
import { compile, parseJson } from '../../platform/http/validation.js';
import type { IncomingRequest, Reply, RouteHandler } from '../../platform/http/types.js';

export interface ClientDeps {
  log: Logger;
  now: () => number;
  apps: ClientAppCache;
  sessions: ClientSessions;
  audit: AuditRepository;
  nonces: NonceRepository;
  signingKey: () => ResponseSigningKey;
  /** Balancer affinity (AFFINITY_ROUTE); absent: answers name no worker. */
  affinity?: ClientAffinity;
}

/** Shared by every answer (never written to: an answer naming a route copies it). */
const JSON_HEADERS: Record<string, string> = Object.freeze({ 'Content-Type': 'application/json' });

/** The header naming the worker that owns a call's session; SDKs send back the last one they got. */
const ROUTE_HEADER = 'X-Keywarden-Route';
/** Answers that carry no route: the balancer should pick any live worker for the next call. */
const ROUTE_LESS = new Set([502, 503, 504]);

/**
 * Balancer affinity: every answer about a session names the worker that owns the session's shard,
 * so a proxy that routes on the echoed header sends the client's next call straight to it.
 */
interface ClientAffinity {
  /** This worker's own route. */
  readonly own: string;
  /** The route of the worker owning a session's shard, when this worker knows it without asking. */
  routeOf(session: string): string | undefined;
  /** HTTP client calls that carried the header, and those among them that reached the worker it named. */
  readonly counts: { echoed: number; reached: number };
}

/** Counts a call (REST or the channel's upgrade) that sent a route back, and whether it reached it. */
export function noteEchoedRoute(affinity: ClientAffinity | undefined, echoed: string | undefined): void {
  if (!affinity || !echoed) return;
  affinity.counts.echoed++;
  if (echoed === affinity.own) affinity.counts.reached++;
}

interface ClientRouteSpec<S extends TSchema> {
  /** Audit action and log name: `client.init`, `client.heartbeat.start`, ... */
  action: string;
  schema: S;
  limiter?: RequestLimiter;
  /** init finds its app by api_key; every other call by its session. */
  identifiesBy: 'api_key' | 'session';
  /** docs/spec.md: heartbeat endpoints answer exactly `Application disabled`; others the app's disabled_message. */
  disabledDetail: 'message' | 'plain';
  /**
   * The call needs of its session only that it exists and its app (a beat: the session's owner
   * decides the rest), so a record this worker read for an earlier such call stands for the lookup
   * (ClientSessions.recentOrGet).
   */
  recentSession?: boolean;
  /**
   * The caller's device is its session's (the realtime channel, whose calls name no HWID): the HWID
   * blacklist applies to it as to a call's `hwid` (admission.ts).
   */
  sessionDevice?: boolean;
  /**
   * Calls refused for an unknown or malformed session count against the caller's address, and an
   * address past its budget is refused (429) before any lookup (docs/protocol.md 11.39: the heartbeat calls).
   */
  unknownSessions?: {
    checkIp(ip: string): Promise<void> | undefined;
    refusedIp(ip: string): Promise<void>;
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A client call as any transport hands it to the gate. */
export interface ClientInput {
  ip: string;
  /** The call's nonce: the X-Nonce header ('' when none was sent). */
  nonce: string;
  /** The HTTP request whose docs/protocol.md 3 signature is checked when the app requires one. Absent: the
   *  transport authenticated the call otherwise (the realtime channel's handshake and MAC). */
  signed?: IncomingRequest;
  /** The parsed body; throws the coded errors that come before the session (rate limit, 400, 413). */
  body: () => unknown;
  /**
   * The record of the body's session as the transport bound it when it opened (the realtime channel,
   * which puts its own session in every body, at its upgrade): while its activation lasts it stands
   * for the lookup. What could change it meanwhile ends the binding instead: a kill or ban is pushed
   * to the connection (which closes), and the session's owner refuses beats of a heartbeat it ended.
   */
  bound?: ClientSession | undefined;
}

/** What a service does with a call that passed the gate. */
type ClientFn<S extends TSchema> = (call: ClientCall<Static<S>>) => ClientOutcome | Promise<ClientOutcome>;

/**
 * One client route: the gate, then `fn` with a ClientCall of plain data; this transport alone turns
 * the service's outcome into the reply, writes its audit line, encrypts and signs.
 */
export function clientHandler<S extends TSchema>(
  deps: ClientDeps,
  spec: ClientRouteSpec<S>,
  fn: ClientFn<S>,
): RouteHandler {
  const run = clientCallRunner(deps, spec, fn);
  return (req) => {
    noteEchoedRoute(deps.affinity, req.headers['x-keywarden-route']);
    const nonce = req.headers['x-nonce'] ?? '';
    const reply = run({
      ip: req.ip,
      nonce,
      signed: req,
      body: limitedBody(spec.limiter, req),
    });
    const signed = (r: Reply) => signReply(r, deps.signingKey(), req.method, req.path, nonce, deps.now());
    return reply instanceof Promise ? reply.then(signed) : signed(reply);
  };
}

/** The body after the caller's address budget: without waiting where the limiter counts in this process. */
function limitedBody(limiter: RequestLimiter | undefined, req: IncomingRequest): () => unknown {
  if (!limiter) return () => restBody(req);
  if (limiter.consumeNow) {
    const now = limiter as Required<RequestLimiter>;
    return () => {
      consumeNowOrThrow(now, req.ip, rateLimited);
      return restBody(req);
    };
  }
  return async () => {
    await consumeOrThrow(limiter, req.ip, rateLimited);
    return restBody(req);
  };
}

function restBody(req: IncomingRequest): unknown {
  if (req.body === 'too_large') throw new AppError('payload_too_large');
  const raw = parseJson(req.body);
  // Only calls carrying a screenshot may use the 5 MiB allowance (docs/protocol.md 1).
  if (req.body.byteLength > DEFAULT_BODY_LIMIT && (!isObject(raw) || raw.screenshot === undefined))
    throw new AppError('payload_too_large');
  return raw;
}

/** The body's api_key (init); 400 when it is missing or cannot be one. */
function apiKeyOf(obj: Record<string, unknown>): string {
  if (typeof obj.api_key !== 'string' || obj.api_key.length === 0 || obj.api_key.length > 128)
    throw validationError('api_key', 'api_key is required', 'missing');
  return obj.api_key;
}

/** The body of a call whose body is not an object (then every field is missing). */
const EMPTY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** One call's state between the gate's steps. */
interface CallState {
  app: CachedApp | null;
  audit: AuditNote;
  /** The session this answer is about (the caller's, or the one init opened): its owner is named. */
  about: string | undefined;
  /** The parsed body, and the same as an object ({} when it is not one: its fields are all missing). */
  raw: unknown;
  obj: Record<string, unknown>;
}

/**
 * The transport-neutral part of a client call: the gate from the session or api_key on, the schema,
 * `fn`, the audit line and the (unsigned) reply. The HTTP routes and the realtime channel share it.
 * A call whose body, session and app are at hand (a channel beat on its bound session, the app in
 * the cache) and whose service answers synchronously is answered synchronously: no promise on the
 * way, the steady load's cost. Anything that has to wait takes the same steps asynchronously.
 */
export function clientCallRunner<S extends TSchema>(
  deps: ClientDeps,
  spec: ClientRouteSpec<S>,
  fn: ClientFn<S>,
): (input: ClientInput) => Reply | Promise<Reply> {
  const validator = compile(spec.schema);
  const sessions = deps.sessions;
  const peekSession = spec.recentSession ? sessions.recentOrPeek.bind(sessions) : sessions.peek.bind(sessions);
  const getSession = spec.recentSession ? sessions.recentOrGet.bind(sessions) : sessions.get.bind(sessions);
  /** After the session or api_key and the app: the checks, the schema, the service, the reply. */
  const admitted = (input: ClientInput, st: CallState, app: CachedApp, session: ClientCall<unknown>['session']) => {
    st.app = app;
    const hwid = typeof st.obj.hwid === 'string' ? st.obj.hwid : spec.sessionDevice ? session?.record.hwid : undefined;
    const refusal = refusalOf(app, { ip: input.ip, hwid });
    if (refusal === 'blacklisted') throw new AppError('access_denied');
    if (refusal === 'app_disabled') {
      throw new AppError(
        'app_disabled',
        spec.disabledDetail === 'message' && app.row.disabled_message ? app.row.disabled_message : undefined,
      );
    }
    const body = validator.parse(st.raw);
    const result = fn({ app, session, ip: input.ip, nonce: input.nonce, body, host: input.signed?.headers.host });
    return result instanceof Promise ? result.then((r) => rendered(st, r)) : rendered(st, result);
  };
  /**
   * The caller's session when it is at hand (bound to the connection, or in this process's memory);
   * undefined when it has to be looked up; throws 401 when it is known not to exist.
   */
  const sessionNow = (input: ClientInput, raw: unknown) => {
    const obj = isObject(raw) ? raw : EMPTY;
    const bound = input.bound;
    const record = bound && sessions.isActivated(bound) ? bound : peekSession(obj.session);
    if (record === null) throw new AppError('session_invalid');
    return record && { session: { token: obj.session as string, record }, obj };
  };
  /** The steps that may wait: the session or app lookups and the request signature. */
  const gated = async (input: ClientInput, st: CallState, read: unknown): Promise<Reply> => {
    const raw = read instanceof Promise ? await read : read;
    st.raw = raw;
    st.obj = isObject(raw) ? raw : EMPTY;
    const obj = st.obj;
    let app: CachedApp | null;
    let session: ClientCall<unknown>['session'] = null;
    if (spec.identifiesBy === 'api_key') {
      app = await deps.apps.getByApiKey(apiKeyOf(obj));
      if (!app) throw new AppError('app_not_found');
    } else {
      const bound = input.bound;
      const record = bound && sessions.isActivated(bound) ? bound : await getSession(obj.session);
      if (!record) throw new AppError('session_invalid');
      session = { token: obj.session as string, record };
      st.about = session.token;
      app = deps.apps.peekById(record.appId) ?? (await deps.apps.getById(record.appId));
      if (!app) throw new AppError('app_not_found');
    }
    st.app = app;
    if (app.row.require_signature && input.signed)
      await checkSignature(deps, input.signed, app.row.id, app.row.api_secret);
    return admitted(input, st, app, session);
  };
  const finish = (input: ClientInput, st: CallState, reply: Reply): Reply => {
    // A 502-504 (the owner could not be reached or answered too late) names no worker: the one this
    // worker knows may be the one that is gone, and the SDKs drop their route on such an answer.
    const route = st.about === undefined || ROUTE_LESS.has(reply.status) ? undefined : deps.affinity?.routeOf(st.about);
    if (route !== undefined) reply.headers = { ...reply.headers, [ROUTE_HEADER]: route };
    const app = st.app;
    const audit = st.audit;
    if (app && !audit.skip) {
      deps.audit.write({
        appId: app.row.id,
        action: audit.action ?? spec.action,
        level: audit.level ?? 'info',
        detail: audit.detail ?? 'ok',
        ip: input.ip,
        resellerId: audit.resellerId ?? null,
        ...(audit.screen ? { screen: audit.screen } : {}),
      });
    }
    return reply;
  };
  const failed = (input: ClientInput, st: CallState, err: unknown): Reply => {
    if (spec.unknownSessions && err instanceof AppError && err.code === 'session_invalid')
      spec.unknownSessions
        .refusedIp(input.ip)
        .catch((e: unknown) => deps.log.warn({ err: e }, 'client.refusal_count_failed'));
    const reply = errorReply(err, deps.log, { action: spec.action });
    const audit = st.audit;
    if (err instanceof AppError || reply.status < 500) {
      audit.level ??= 'warning';
      const why =
        err instanceof AppError ? (typeof err.detail === 'string' ? err.detail : err.code) : 'validation failed';
      audit.detail ??= `${reply.status} ${why}`;
    } else {
      audit.level ??= 'error';
      audit.detail ??= reply.status === 503 ? '503 service unavailable' : `${reply.status} internal error`;
    }
    return finish(input, st, reply);
  };
  /** The call from its body on (the rate limit and 400/413 come first, from `body`). */
  const start = (input: ClientInput, st: CallState): Reply | Promise<Reply> => {
    const read = input.body();
    if (read instanceof Promise) return gated(input, st, read);
    else if (spec.identifiesBy === 'session') {
      const now = sessionNow(input, read);
      const app = now ? deps.apps.peekById(now.session.record.appId) : undefined;
      if (now && app && !(app.row.require_signature && input.signed)) {
        // Everything at hand: the same steps as gated(), none of which waits.
        st.raw = read;
        st.obj = now.obj;
        st.about = now.session.token;
        return admitted(input, st, app, now.session);
      } else return gated(input, st, read);
    } else {
      const obj = isObject(read) ? read : EMPTY;
      const app = deps.apps.peekByApiKey(apiKeyOf(obj));
      if (app === null) throw new AppError('app_not_found');
      if (app && !(app.row.require_signature && input.signed)) {
        st.raw = read;
        st.obj = obj;
        return admitted(input, st, app, null);
      } else return gated(input, st, read);
    }
  };
  return (input) => {
    const st: CallState = { app: null, audit: {}, about: undefined, raw: undefined, obj: EMPTY };
    let reply: Reply | Promise<Reply>;
    try {
      const over = spec.unknownSessions?.checkIp(input.ip);
      reply = over ? over.then(() => start(input, st)) : start(input, st);
    } catch (err) {
      return failed(input, st, err);
    }
    return reply instanceof Promise
      ? reply.then(
          (r) => finish(input, st, r),
          (err: unknown) => failed(input, st, err),
        )
      : finish(input, st, reply);
  };

  /** The service's outcome as the reply; a refusal is thrown to the error reply with its audit note. */
  function rendered(st: CallState, result: ClientOutcome): Reply {
    st.audit = result.audit;
    if (!result.ok) throw result.error;
    if (!st.about && typeof result.body.session === 'string') st.about = result.body.session;
    // JSON text: the channel frames it as it is, REST turns it into bytes once, for its signature.
    const json = JSON.stringify(result.body);
    const initIv = typeof st.obj.init_iv === 'string' && st.obj.init_iv.length > 0 ? st.obj.init_iv : undefined;
    return result.responseKey && initIv
      ? { status: 200, body: encryptBodyWithKey(Buffer.from(json), result.responseKey, initIv), headers: JSON_HEADERS }
      : { status: 200, body: json, headers: JSON_HEADERS };
  }
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
