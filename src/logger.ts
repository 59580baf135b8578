import { pino, type Logger } from 'pino';
import type { Config } from './config.js';

export type { Logger };

/** Structured JSON logs; event names are dotted (`http.unhandled_error`, `client.login`). */
export function createLogger(config: Pick<Config, 'logLevel'>, bindings: Record<string, unknown> = {}): Logger {
  return pino({ level: config.logLevel, base: { pid: process.pid, ...bindings } });
}
