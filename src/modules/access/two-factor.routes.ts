// Two-factor sign-in routes (docs/protocol.md 13.2): set up a pending secret, confirm it with a code (the
// recovery codes are in that answer and nowhere else), turn it off with the password and a code.
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from './auth.service.js';
import { callerOrigin, dashboardHandler } from './dashboard-route.js';

const Code = Type.String({ minLength: 1, maxLength: 64 });
const EnableBody = Type.Object({ code: Code }, { additionalProperties: false });
const DisableBody = Type.Object(
  { password: Type.String({ minLength: 1, maxLength: 1024 }), code: Code },
  { additionalProperties: false },
);

export function twoFactorRoutes(router: Router, { auth }: { auth: DashboardAuth }): void {
  router.add({
    method: 'post',
    path: '/api/auth/2fa/setup',
    doc: {
      summary: 'Start two-factor setup: a new pending TOTP secret and its otpauth:// URL (replaces an earlier one)',
      tag: 'auth',
      auth: 'dashboard',
      responses: { 200: '{secret, otpauth_url}', 409: 'Two-factor sign-in is already enabled' },
    },
    handler: dashboardHandler({ auth }, async ({ principal, req }) =>
      auth.setupTwoFactor(principal, callerOrigin(req)),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/auth/2fa/enable',
    doc: {
      summary:
        "Confirm the pending secret with a code; answers ten recovery codes, once (the account's other sessions end)",
      tag: 'auth',
      auth: 'dashboard',
      body: EnableBody,
      responses: { 200: '{recovery_codes}', 400: 'Invalid two-factor code; Set up two-factor sign-in first' },
    },
    handler: dashboardHandler({ auth, body: EnableBody }, async ({ principal, body, req }) => ({
      recovery_codes: await auth.enableTwoFactor(principal, body.code, callerOrigin(req)),
    })),
  });
  router.add({
    method: 'post',
    path: '/api/auth/2fa/disable',
    doc: {
      summary: 'Turn two-factor sign-in off with the password and a code or recovery code (the other sessions end)',
      tag: 'auth',
      auth: 'dashboard',
      body: DisableBody,
      responses: { 200: 'Off', 400: 'Current password is incorrect; Invalid two-factor code', 429: 'Locked out' },
    },
    handler: dashboardHandler({ auth, body: DisableBody }, async ({ principal, body, req }) => {
      await auth.disableTwoFactor(principal, body.password, body.code, callerOrigin(req));
      return { success: true };
    }),
  });
}
