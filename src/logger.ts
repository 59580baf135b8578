import { pino, type Logger } from 'pino';
import type { Config } from './config.js';

export type { Logger };

/**
 * Structured JSON logs; event names are dotted (`http.unhandled_error`, `client.login`).
 * The destination is synchronous: lines keep their order and none is lost when the process
 * exits right after shutdown. Nothing on the request hot path logs at info level.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, bindings: Record<string, unknown> = {}): Logger {
  return pino(
    { level: config.logLevel, base: { pid: process.pid, ...bindings } },
    pino.destination({ dest: 1, sync: true }),
  );
}
