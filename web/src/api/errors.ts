// Every failed call becomes an ApiError carrying the server's `detail` text, and for a 422 the
// message of each field it names (docs/protocol.md 1: detail = [{loc: ["body", "field", ...], msg, type}]),
// put in words a person understands (validation-text.ts).
import { fieldLabel, issuePath, issueText } from './validation-text.js';

export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type?: string;
}

export class ApiError extends Error {
  /** Field path (`hwid`, `key_costs.days:30`, `query.q`...) -> message, from a 422. */
  readonly fields: Readonly<Record<string, string>>;

  constructor(
    readonly status: number,
    message: string,
    fields: Record<string, string> = {},
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'ApiError';
    this.fields = fields;
  }

  /** The message for a field, or for any field under it (`key_costs` finds `key_costs.days:30`). */
  field(name: string): string | undefined {
    if (this.fields[name] !== undefined) return this.fields[name];
    const prefix = `${name}.`;
    for (const [k, v] of Object.entries(this.fields)) if (k.startsWith(prefix)) return v;
    return undefined;
  }
}

/** `["body", "key_costs", "days:30"]` -> `key_costs.days:30`; query fields keep their `query.` prefix. */
export const fieldPath = issuePath;

/** Builds the error of a failed response from its status and parsed body (which may be anything). */
export function apiError(status: number, statusText: string, body: unknown, retryAfter?: string | null): ApiError {
  const seconds = retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  const detail =
    typeof body === 'object' && body !== null && 'detail' in body ? (body as { detail: unknown }).detail : undefined;
  if (Array.isArray(detail)) {
    const fields: Record<string, string> = {};
    const lines: string[] = [];
    for (const issue of detail as ValidationIssue[]) {
      const loc = Array.isArray(issue?.loc) ? issue.loc : ['body'];
      const path = fieldPath(loc);
      const msg = issueText({
        loc,
        msg: typeof issue?.msg === 'string' ? issue.msg : '',
        type: typeof issue?.type === 'string' ? issue.type : undefined,
      });
      fields[path] ??= msg;
      lines.push(path === 'body' ? msg : `${fieldLabel(path)}: ${msg}`);
    }
    return new ApiError(status, lines.join(' ') || 'Some of the input was not accepted.', fields, seconds);
  }
  if (typeof detail === 'string') return new ApiError(status, detail, {}, seconds);
  if (typeof detail === 'object' && detail !== null && typeof (detail as { message?: unknown }).message === 'string') {
    return new ApiError(status, (detail as { message: string }).message, {}, seconds);
  }
  if (typeof body === 'string' && body.trim() && body.length < 300 && !body.trimStart().startsWith('<'))
    return new ApiError(status, body.trim(), {}, seconds);
  return new ApiError(
    status,
    status === 0
      ? 'The server could not be reached.'
      : `The server answered ${status}${statusText ? ` ${statusText}` : ''}.`,
    {},
    seconds,
  );
}
