// Transport-neutral request and reply: route handlers never see a uWS object (docs/architecture.md "House practices"
// 1).
import type { BodyStream } from './body-stream.js';
import type { FileBody } from './file-reply.js';

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
  /** A route mounted with `streamBody`: its body as it arrives (then `body` is empty). */
  readonly upload?: BodyStream;
}

export interface Reply {
  status: number;
  body: Buffer | string;
  headers: Record<string, string>;
  /**
   * A streamed body (then `body` is unused): the transport writes each chunk as it comes, waits while
   * the client is behind, and ends the iterator (`return()`) when the client goes away.
   */
  stream?: AsyncIterator<string | Buffer>;
  /** A file sent from disk (then `body` is unused; Content-Length is written from its length). */
  file?: FileBody;
}

/** A route's handler; one that needs nothing waited for may answer synchronously. */
export type RouteHandler = (req: IncomingRequest) => Reply | Promise<Reply>;

const JSON_HEADERS = { 'Content-Type': 'application/json' } as const;

export function jsonReply(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return { status, body: Buffer.from(JSON.stringify(value)), headers: { ...JSON_HEADERS, ...headers } };
}

/** A 200 whose body is written chunk by chunk (exports); see Reply.stream. */
export function streamReply(chunks: AsyncIterable<string | Buffer>, headers: Record<string, string>): Reply {
  return { status: 200, body: '', headers, stream: chunks[Symbol.asyncIterator]() };
}

export function textReply(status: number, text: string, contentType = 'text/plain; charset=utf-8'): Reply {
  return { status, body: text, headers: { 'Content-Type': contentType } };
}
