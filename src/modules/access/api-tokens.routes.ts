// API token routes (docs/protocol.md 13.1). No token reaches them (token-scopes.ts): a token cannot mint,
// list or revoke tokens.
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { jsonReply } from '../../platform/http/types.js';
import { pathId } from '../../platform/http/validation.js';
import type { DashboardAuth } from './auth.service.js';
import { dashboardHandler } from './dashboard-route.js';
import { TOKEN_SCOPES } from './token-scopes.js';

const Uuid = Type.String({ pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' });
const CreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    scopes: Type.Array(Type.Union(TOKEN_SCOPES.map((s) => Type.Literal(s))), { minItems: 1, maxItems: 20 }),
    app_ids: Type.Optional(Type.Union([Type.Array(Uuid, { maxItems: 1000 }), Type.Null()])),
    expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Null()])),
  },
  { additionalProperties: false },
);

export function apiTokenRoutes(router: Router, { auth }: { auth: DashboardAuth }): void {
  router.add({
    method: 'post',
    path: '/api/tokens',
    doc: {
      summary: 'Create an API token (the token is in this answer only)',
      tag: 'tokens',
      auth: 'dashboard',
      body: CreateBody,
      permission: 'any signed-in account (not a token)',
      responses: { 201: '{id, name, token, scopes, app_ids, expires_at, created_at}' },
    },
    handler: dashboardHandler({ auth, body: CreateBody }, async ({ principal, body, req }) =>
      jsonReply(201, await auth.tokens.create(principal, body, req.ip)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/tokens',
    doc: {
      summary: "The caller's API tokens (never the token itself), with last use",
      tag: 'tokens',
      auth: 'dashboard',
      permission: 'any signed-in account (not a token)',
    },
    handler: dashboardHandler({ auth }, async ({ principal }) => auth.tokens.list(principal)),
  });
  router.add({
    method: 'delete',
    path: '/api/tokens/:id',
    doc: {
      summary: "Revoke an API token: the caller's own, or (an owner) any of its tree's",
      tag: 'tokens',
      auth: 'dashboard',
      permission: 'the token owner; its tree owner; developer',
      responses: { 200: 'Revoked', 404: 'Token not found' },
    },
    handler: dashboardHandler({ auth }, async ({ principal, params, req }) => {
      await auth.tokens.revoke(principal, pathId(params.id, 'token_not_found'), req.ip);
      return { success: true };
    }),
  });
}
