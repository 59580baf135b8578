// The core call context of the client API (Colyseus keeps one such context that every transport
// fills): a transport (HTTP or the realtime channel) runs the gate, fills a ClientCall with plain
// data and hands it to a service; the service returns an outcome value that carries what the audit
// log should say. Rendering, auditing, encryption and signing stay with the transport
// (client-gate.ts).
import { AppError, ValidationError } from '../../errors.js';
import type { AuditLevel } from '../../platform/db/entities/index.js';
import type { CachedApp } from './client-app-cache.js';
import type { ClientSession } from './client-sessions.js';

export interface ClientCall<B> {
  app: CachedApp;
  /** The session token and record (absent on init). */
  session: { token: string; record: ClientSession } | null;
  ip: string;
  /** The request's X-Nonce ('' when none was sent). */
  nonce: string;
  body: B;
  /** The HTTP request's Host header (links a reply hands out when PUBLIC_URL is not set). */
  host?: string | undefined;
}

/** What the audit line of a call records, and for which reseller; `skip`: no line (accepted beats). */
export interface AuditNote {
  action?: string;
  detail?: string;
  level?: AuditLevel;
  resellerId?: string | null;
  /** The activation's screenshot (DATA_DIR-relative path): the log's Screen column. */
  screen?: string;
  skip?: boolean;
}

export type ClientOutcome =
  | {
      ok: true;
      body: Record<string, unknown>;
      /** the session's response key: encrypt with it when the call carried init_iv (docs/protocol.md 5) */
      responseKey?: Buffer | null;
      audit: AuditNote;
    }
  | { ok: false; error: AppError | ValidationError; audit: AuditNote };

/** What a service answers: the reply body and, when the call asked for encryption, its key. */
type Answer = { body: Record<string, unknown>; responseKey?: Buffer | null };

/**
 * Runs a service operation that notes its audit line as it goes and throws coded errors for expected
 * refusals; returns both as one outcome value. Anything else thrown is a bug and is rethrown. An
 * operation that answers synchronously (a beat on this worker's own session) gets its outcome
 * synchronously.
 */
export function outcome(run: (audit: AuditNote) => Promise<Answer>): Promise<ClientOutcome>;
export function outcome(run: (audit: AuditNote) => Answer | Promise<Answer>): ClientOutcome | Promise<ClientOutcome>;
export function outcome(run: (audit: AuditNote) => Answer | Promise<Answer>): ClientOutcome | Promise<ClientOutcome> {
  const audit: AuditNote = {};
  const refusal = (err: unknown): ClientOutcome => {
    if (err instanceof AppError || err instanceof ValidationError) return { ok: false, error: err, audit };
    throw err;
  };
  try {
    const answer = run(audit);
    return answer instanceof Promise
      ? answer.then((a): ClientOutcome => ({ ok: true, ...a, audit }), refusal)
      : { ok: true, ...answer, audit };
  } catch (err) {
    return refusal(err);
  }
}
