// The one mapping from thrown errors to HTTP replies (STYLE 7): `{detail}` bodies everywhere.
import type { Logger } from 'pino';
import { AppError, ERRORS, ValidationError } from '../errors.js';
import { jsonReply, type Reply } from './types.js';

export function errorReply(err: unknown, log: Logger, context: Record<string, unknown> = {}): Reply {
  if (err instanceof AppError) return jsonReply(err.status, { detail: err.detail }, { ...err.headers });
  if (err instanceof ValidationError) return jsonReply(422, { detail: err.issues });
  log.error({ err, ...context }, 'http.unhandled_error');
  return jsonReply(500, { detail: ERRORS.internal.detail });
}
