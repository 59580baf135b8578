// The one mapping from thrown errors to HTTP replies (STYLE 7): `{detail}` bodies everywhere.
// Besides coded errors it recognises, in one place, the failures of the infrastructure below
// (PostgreSQL, Redis) so that an outage answers 503 with Retry-After and a lost unique-name race
// answers the catalogue's conflict: never a 500 for something that is not a bug.
import type { Logger } from 'pino';
import { AppError, ERRORS, ValidationError, type ErrorCode } from '../errors.js';
import { jsonReply, type Reply } from './types.js';

/** Seconds a client is told to wait when a dependency is unreachable. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/** Unique constraints whose violation is a caller's conflict, not a bug (PROTOCOL 11.22). */
const UNIQUE_CONFLICTS: Readonly<Record<string, ErrorCode>> = {
  accounts_username_unique: 'account_username_taken',
  accounts_email_unique: 'email_taken',
  end_users_app_id_username_unique: 'username_taken',
};

// PostgreSQL SQLSTATE classes 08 (connection exception) and 57P (operator intervention: shutdown,
// crash, starting up); socket errors from the driver; pool and client errors of knex/pg; ioredis.
const PG_UNAVAILABLE = /^(08|57P)/;
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTCONN',
  'ECONNABORTED',
]);
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Timeout acquiring a connection',
  'Client has encountered a connection error',
  'connect ECONNREFUSED',
  'the database system is',
  'Connection is closed',
  "Stream isn't writeable",
  'Reached the max retries per request limit',
  'Command timed out',
  'Knex: Timeout',
  '.s.PGSQL.',
  'Connection ended unexpectedly',
  'terminating connection',
];

function fields(err: unknown): {
  code?: unknown;
  constraint?: unknown;
  message: string;
  name?: unknown;
  cause?: unknown;
} {
  if (typeof err !== 'object' || err === null) return { message: String(err) };
  const e = err as Record<string, unknown>;
  return {
    code: e.code,
    constraint: e.constraint,
    message: typeof e.message === 'string' ? e.message : '',
    name: e.name,
    cause: e.cause,
  };
}

/** A driver or store failure as the coded error it stands for; undefined for a genuine bug. */
export function infrastructureError(err: unknown, depth = 0): AppError | undefined {
  if (depth > 3) return undefined;
  const f = fields(err);
  if (f.code === '23505' && typeof f.constraint === 'string') {
    const code = UNIQUE_CONFLICTS[f.constraint];
    if (code) return new AppError(code);
  }
  const unavailable =
    (typeof f.code === 'string' && (PG_UNAVAILABLE.test(f.code) || SOCKET_CODES.has(f.code))) ||
    f.name === 'MaxRetriesPerRequestError' ||
    f.name === 'ConnectionException' ||
    UNAVAILABLE_MESSAGES.some((m) => f.message.includes(m));
  if (unavailable) return new AppError('unavailable', undefined, { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_S) });
  return f.cause !== undefined ? infrastructureError(f.cause, depth + 1) : undefined;
}

export function errorReply(err: unknown, log: Logger, context: Record<string, unknown> = {}): Reply {
  if (err instanceof AppError) return jsonReply(err.status, { detail: err.detail }, { ...err.headers });
  if (err instanceof ValidationError) return jsonReply(422, { detail: err.issues });
  const known = infrastructureError(err);
  if (known) {
    if (known.code === 'unavailable') log.warn({ err, ...context }, 'http.dependency_unavailable');
    return jsonReply(known.status, { detail: known.detail }, { ...known.headers });
  }
  log.error({ err, ...context }, 'http.unhandled_error');
  return jsonReply(500, { detail: ERRORS.internal.detail });
}
