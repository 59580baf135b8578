// Transport-neutral request and reply: route handlers never see a uWS object (STYLE 1).

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface IncomingRequest {
  readonly method: Method;
  readonly path: string;
  readonly query: URLSearchParams;
  /** Lower-cased header names, copied synchronously from uWS's request. */
  readonly headers: Readonly<Record<string, string>>;
  /** Client IP after TRUSTED_PROXIES is applied. */
  readonly ip: string;
  readonly params: Readonly<Record<string, string>>;
  /** Raw body bytes, or 'too_large' when the body passed the route's limit (then not kept). */
  readonly body: Buffer | 'too_large';
}

export interface Reply {
  status: number;
  body: Buffer | string;
  headers: Record<string, string>;
}

export type RouteHandler = (req: IncomingRequest) => Promise<Reply>;

const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

export function jsonReply(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return { status, body: Buffer.from(JSON.stringify(value)), headers: { ...JSON_HEADERS, ...headers } };
}

export function textReply(status: number, text: string, contentType = 'text/plain; charset=utf-8'): Reply {
  return { status, body: text, headers: { 'Content-Type': contentType } };
}
