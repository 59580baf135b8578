// The caller's own security (Account > Security): sessions, second-factor state, the owner's
// two-factor policy. Under /api/account: no API token reaches these (token-scopes.ts).
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { pathId } from '../../platform/http/validation.js';
import type { DashboardAuth } from './auth.service.js';
import type { AccountSecurity } from './account-security.service.js';
import { dashboardHandler } from './dashboard-route.js';

const PolicyBody = Type.Object({ require_two_factor: Type.Boolean() }, { additionalProperties: false });

export function accountSecurityRoutes(
  router: Router,
  { auth, security }: { auth: DashboardAuth; security: AccountSecurity },
): void {
  router.add({
    method: 'get',
    path: '/api/account/security',
    doc: {
      summary: "The caller's second-factor state and live sessions (browser, address, last seen)",
      tag: 'account',
      auth: 'dashboard',
      permission: 'any signed-in account (not a token)',
    },
    handler: dashboardHandler({ auth }, async ({ principal }) => security.state(principal)),
  });
  router.add({
    method: 'patch',
    path: '/api/account/security',
    doc: {
      summary: "An owner's policy: every member of its tree must use two-factor sign-in",
      tag: 'account',
      auth: 'dashboard',
      body: PolicyBody,
      permission: 'owner',
    },
    handler: dashboardHandler({ auth, body: PolicyBody }, async ({ principal, body, req }) =>
      security.setPolicy(principal, body.require_two_factor, req.ip),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/account/sessions',
    doc: {
      summary: "Sign out everywhere: ends every session of the caller's but this one",
      tag: 'account',
      auth: 'dashboard',
      permission: 'any signed-in account (not a token)',
    },
    handler: dashboardHandler({ auth }, async ({ principal, req }) => ({
      revoked: await security.revokeOthers(principal, req.ip),
    })),
  });
  router.add({
    method: 'delete',
    path: '/api/account/sessions/:id',
    doc: {
      summary: "End one of the caller's sessions",
      tag: 'account',
      auth: 'dashboard',
      permission: 'any signed-in account (not a token)',
      responses: { 200: 'Ended', 404: 'Session not found' },
    },
    handler: dashboardHandler({ auth }, async ({ principal, params, req }) => {
      await security.revoke(principal, pathId(params.id, 'session_not_found'), req.ip);
      return { success: true };
    }),
  });
}
