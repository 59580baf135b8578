// Route registry: every route is declared once with its schemas; the registry mounts it on the
// transport (with and without the /api prefix where docs/protocol.md 1 says so) and writes the OpenAPI
// document from the very schemas the handlers validate with.
import type { TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { AppError } from '../../errors.js';
import { errorReply } from './error-reply.js';
import type { Method, Reply, RouteHandler } from './types.js';
import type { HttpServer } from './uws.js';

export const DEFAULT_BODY_LIMIT = 16 * 1024;
/** docs/protocol.md 1, 11.27: calls carrying a screenshot (3 MiB decoded, 4 MiB as base64) may send 5 MiB. */
export const SCREENSHOT_BODY_LIMIT = 5 * 1024 * 1024;

export interface RouteDoc {
  summary: string;
  tag: string;
  /**
   * 'dashboard': bearer token or kw_session cookie; 'client': the client gate; 'portal': a customer's
   * portal token (bearer or kw_portal cookie); 'none': public.
   */
  auth: 'none' | 'dashboard' | 'client' | 'portal';
  body?: TSchema;
  query?: TSchema;
  /** Permission or role needed, as docs/api.md's route table states it. */
  permission?: string;
  responses?: Record<number, string>;
}

interface Route {
  method: Method;
  /** Canonical path with `:param` segments, e.g. `/api/apps/:id`. */
  path: string;
  /** Also serve the path without its `/api` prefix (docs/protocol.md 1). */
  unprefixed?: boolean;
  bodyLimit?: number;
  /** The handler reads the body as it arrives (IncomingRequest.upload), up to bodyLimit. */
  streamBody?: boolean;
  /** Served by another transport (WebSocket, SSE): listed in OpenAPI, not mounted here. */
  docOnly?: boolean;
  doc: RouteDoc;
  handler: RouteHandler;
}

export class Router {
  readonly routes: Route[] = [];
  private matchers: { re: RegExp; method: Method }[] | undefined;

  add(route: Route): void {
    this.routes.push(route);
    this.matchers = undefined;
  }

  /** Methods some route serves at this concrete path (an unmatched request's 405 `Allow`, docs/protocol.md 11.20). */
  methodsAt(path: string): Method[] {
    this.matchers ??= this.routes.flatMap((r) => {
      const variants = r.unprefixed ? [r.path, r.path.replace(/^\/api/, '')] : [r.path];
      return variants.map((p) => ({
        re: new RegExp(`^${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z0-9_]+/g, '[^/]+')}$`),
        method: r.method,
      }));
    });
    return [...new Set(this.matchers.filter((m) => m.re.test(path)).map((m) => m.method))];
  }

  mount(server: HttpServer): void {
    for (const r of this.routes) {
      if (r.docOnly) continue;
      const bodyLimit = r.bodyLimit ?? DEFAULT_BODY_LIMIT;
      const streamBody = r.streamBody === true;
      server.mount({ method: r.method, pattern: r.path, bodyLimit, streamBody, handler: r.handler });
      if (r.unprefixed)
        server.mount({
          method: r.method,
          pattern: r.path.replace(/^\/api/, ''),
          bodyLimit,
          streamBody,
          handler: r.handler,
        });
    }
  }

  /**
   * docs/protocol.md 11.20: an unknown path is 404, a known path with another method 405 with `Allow`;
   * `finish` (the client signature under /api/client/) applies to them like to every answer.
   */
  mountFallback(
    server: HttpServer,
    log: Logger,
    finish: (method: string, path: string, nonce: string, reply: Reply) => Reply,
  ): void {
    server.mountFallback(async (req) => {
      const allowed = this.methodsAt(req.path);
      // A path whose method is served but that reached here anyway (a malformed %-escape) names nothing: 404.
      const err =
        allowed.length > 0 && !allowed.includes(req.method)
          ? new AppError('method_not_allowed', undefined, { Allow: allowed.map((m) => m.toUpperCase()).join(', ') })
          : new AppError('route_not_found');
      return finish(req.method, req.path, req.headers['x-nonce'] ?? '', errorReply(err, log));
    });
  }

  openApi(info: { title: string; version: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const detailSchema = {
      type: 'object',
      properties: {
        detail: {
          oneOf: [
            { type: 'string' },
            { type: 'object' },
            { type: 'array', items: { $ref: '#/components/schemas/ValidationIssue' } },
          ],
        },
      },
      required: ['detail'],
    };
    for (const r of this.routes) {
      const variants = r.unprefixed ? [r.path, r.path.replace(/^\/api/, '')] : [r.path];
      for (const p of variants) {
        const oaPath = p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
        const params = [...p.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({
          name: m[1],
          in: 'path',
          required: true,
          schema: { type: 'string' },
        }));
        const queryParams = r.doc.query ? queryParameters(r.doc.query) : [];
        const responses: Record<string, unknown> = {};
        for (const [code, desc] of Object.entries(r.doc.responses ?? { 200: 'Success' })) {
          responses[code] = {
            description: desc,
            content: { 'application/json': { schema: Number(code) < 400 ? {} : detailSchema } },
          };
        }
        responses['422'] ??= {
          description: 'Validation failure',
          content: { 'application/json': { schema: detailSchema } },
        };
        const op: Record<string, unknown> = {
          summary: r.doc.summary,
          tags: [r.doc.tag],
          parameters: [...params, ...queryParams],
          responses,
          ...(r.doc.permission ? { 'x-permission': r.doc.permission } : {}),
          security:
            r.doc.auth === 'dashboard'
              ? [{ bearer: [] }, { cookie: [] }]
              : r.doc.auth === 'portal'
                ? [{ bearer: [] }, { portalCookie: [] }]
                : [],
        };
        if (r.doc.body)
          op.requestBody = { required: true, content: { 'application/json': { schema: plain(r.doc.body) } } };
        (paths[oaPath] ??= {})[r.method] = op;
      }
    }
    return {
      openapi: '3.1.0',
      info,
      paths,
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer' },
          cookie: { type: 'apiKey', in: 'cookie', name: 'kw_session' },
          portalCookie: { type: 'apiKey', in: 'cookie', name: 'kw_portal' },
        },
        schemas: {
          ValidationIssue: {
            type: 'object',
            properties: {
              loc: { type: 'array', items: { type: ['string', 'integer'] } },
              msg: { type: 'string' },
              type: { type: 'string' },
            },
            required: ['loc', 'msg', 'type'],
          },
        },
      },
    };
  }
}

/** TypeBox schemas carry symbol keys; JSON round-trip leaves the plain JSON Schema. */
function plain(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema));
}

function queryParameters(schema: TSchema): unknown[] {
  const props = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  const required = new Set((schema as { required?: string[] }).required ?? []);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: 'query',
    required: required.has(name),
    schema: plain(s),
  }));
}
