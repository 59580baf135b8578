// The realtime client channel's routes: the dashboard's notice to live clients, and the channel
// itself in OpenAPI (it is served by ws/client-channel.ts, not by this router).
import { Type } from '@sinclair/typebox';
import type { AppDeps } from '../../app.js';
import { AppError } from '../../errors.js';
import { dashboardHandler } from '../access/dashboard-route.js';
import { pathId } from '../../platform/http/validation.js';

const NoticeBody = Type.Object(
  { message: Type.String({ minLength: 1, maxLength: 4096 }) }, // PROTOCOL 11.18's free-text limit
  { additionalProperties: false },
);

export function channelRoutes({ router, domain }: AppDeps): void {
  const { auth, push } = domain;
  router.add({
    method: 'post',
    path: '/api/apps/:id/notice',
    doc: {
      summary: 'Send a notice to every client of the app connected to the realtime channel',
      tag: 'apps',
      auth: 'dashboard',
      body: NoticeBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: NoticeBody }, async ({ principal, params, body }) => {
      await push.notice(principal, pathId(params.id, 'app_not_found'), body.message);
      return { success: true };
    }),
  });
  router.add({
    method: 'get',
    path: '/api/client/ws',
    docOnly: true,
    handler: async () => {
      throw new AppError('route_not_found');
    },
    doc: {
      summary:
        'Realtime channel (WebSocket): headers X-Session and X-Nonce = base64url(client X25519 key), signed per ' +
        'PROTOCOL 3 when required; a signed hello, then MAC-ed heartbeat calls and pushes (README "Realtime channel")',
      tag: 'client',
      auth: 'client',
    },
  });
}
