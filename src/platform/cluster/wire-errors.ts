// Errors that cross workers (docs/architecture.md "House practices" 7): a coded error raised on a shard's owner arrives
// at the caller as the same error, with its code, its detail (an app's disabled_message, a 426 object)
// and its headers (Retry-After), so the HTTP answer is the one the owner would have given.
import { AppError, ERRORS, ValidationError, type Detail, type ErrorCode, type ValidationIssue } from '../../errors.js';

/** The owner no longer holds the shard (a lease moved): the caller asks the new owner. */
export class NotOwner extends Error {
  constructor(readonly shard: number) {
    super(`not the owner of shard ${shard}`);
  }
}

export type WireError =
  | { kind: 'coded'; code: ErrorCode; detail: Detail; headers: Record<string, string> }
  | { kind: 'validation'; issues: ValidationIssue[] }
  | { kind: 'not_owner'; shard: number }
  | { kind: 'other'; name: string; message: string };

export function encodeError(err: unknown): WireError {
  if (err instanceof AppError)
    return { kind: 'coded', code: err.code, detail: err.detail, headers: { ...err.headers } };
  if (err instanceof ValidationError) return { kind: 'validation', issues: err.issues };
  if (err instanceof NotOwner) return { kind: 'not_owner', shard: err.shard };
  const e = err instanceof Error ? err : new Error(String(err));
  return { kind: 'other', name: e.name, message: e.message };
}

export function decodeError(w: WireError): Error {
  switch (w.kind) {
    case 'coded':
      return w.code in ERRORS
        ? new AppError(w.code, w.detail, w.headers)
        : new Error(`unknown error code ${String(w.code)}`);
    case 'validation':
      return new ValidationError(w.issues);
    case 'not_owner':
      return new NotOwner(w.shard);
    default: {
      const err = new Error(w.message);
      err.name = w.name;
      return err;
    }
  }
}
