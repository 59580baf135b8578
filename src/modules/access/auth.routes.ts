import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from './auth.service.js';
import { accountView, SESSION_COOKIE, SESSION_TTL_MS } from './auth.service.js';
import { callerOrigin, dashboardHandler } from './dashboard-route.js';
import { jsonReply } from '../../platform/http/types.js';

const LoginBody = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 64 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    /** A TOTP code or an unused recovery code, when two-factor sign-in is on (docs/protocol.md 13.2). */
    otp: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);

const PasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 1024 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

function cookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  const attributes = `Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;
  return `${SESSION_COOKIE}=${value}; ${attributes}`;
}

export function authRoutes(router: Router, { auth }: { auth: DashboardAuth }): void {
  router.add({
    method: 'post',
    path: '/api/auth/login',
    doc: {
      summary: 'Sign in; returns a bearer token and sets the kw_session cookie',
      tag: 'auth',
      auth: 'none',
      body: LoginBody,
      responses: {
        200: 'Signed in',
        401: 'Invalid username or password; Two-factor code required; Invalid two-factor code',
        429: 'Locked out',
      },
    },
    handler: dashboardHandler({ auth, body: LoginBody, authenticate: false }, async ({ req, body }) => {
      const { token, principal } = await auth.login(body, callerOrigin(req));
      // Secure only behind a TLS-terminating proxy, so the cookie still works over plain http on localhost.
      const secure = req.headers['x-forwarded-proto'] === 'https';
      return jsonReply(
        200,
        { token, account: accountView(principal) },
        { 'Set-Cookie': cookie(token, SESSION_TTL_MS / 1000, secure) },
      );
    }),
  });
  router.add({
    method: 'post',
    path: '/api/auth/logout',
    doc: { summary: 'Sign out this session', tag: 'auth', auth: 'dashboard' },
    handler: dashboardHandler({ auth }, async ({ principal, req }) => {
      await auth.logout(principal, callerOrigin(req));
      return jsonReply(200, { success: true }, { 'Set-Cookie': cookie('', 0, false) });
    }),
  });
  router.add({
    method: 'get',
    path: '/api/auth/me',
    doc: { summary: 'The signed-in account', tag: 'auth', auth: 'dashboard' },
    // Only the account itself sees its webhook secret (it verifies X-Keywarden-Signature with it).
    // `two_factor_required`: its owner requires a second factor it has not set up yet.
    handler: dashboardHandler({ auth }, async ({ principal }) => ({
      account: {
        ...accountView(principal),
        webhook_secret: principal.account.webhookSecret,
        two_factor_required: principal.twoFactorMissing === true,
        ...(principal.account.role === 'owner' ? { require_two_factor: principal.account.requireTwoFactor } : {}),
      },
    })),
  });
  router.add({
    method: 'post',
    path: '/api/auth/password',
    doc: {
      summary: 'Change own password (other sessions are revoked)',
      tag: 'auth',
      auth: 'dashboard',
      body: PasswordBody,
    },
    handler: dashboardHandler({ auth, body: PasswordBody }, async ({ principal, body, req }) => {
      await auth.changePassword(principal, body.current_password, body.password, callerOrigin(req));
      return { success: true };
    }),
  });
}
