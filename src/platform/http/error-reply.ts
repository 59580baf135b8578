// The one mapping from thrown errors to HTTP replies (docs/architecture.md "House practices" 7): `{detail}` bodies
// everywhere. Besides coded errors it recognises the failures of the infrastructure below (errors.ts,
// infrastructureError) so that an outage answers 503 with Retry-After and a lost unique-name race
// answers the catalogue's conflict: never a 500 for something that is not a bug.
import type { Logger } from 'pino';
import { AppError, ERRORS, ValidationError, infrastructureError } from '../../errors.js';

export { UNAVAILABLE_RETRY_AFTER_S } from '../../errors.js';
import { jsonReply, type Reply } from './types.js';

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
