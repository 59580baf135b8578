// The realtime client channel's routes: the dashboard's notice to live clients, and the channel
// itself in OpenAPI (it is served by client-channel.ts, not by this router).
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from '../access/index.js';
import type { ClientPushService } from './client-push.service.js';
import { AppError } from '../../errors.js';
import { dashboardHandler } from '../access/index.js';
import { pathId } from '../../platform/http/validation.js';

const NoticeBody = Type.Object(
  { message: Type.String({ minLength: 1, maxLength: 4096 }) }, // docs/protocol.md 11.18's free-text limit
  { additionalProperties: false },
);

interface ChannelRoutesDeps {
  auth: DashboardAuth;
  push: ClientPushService;
}

export function channelRoutes(router: Router, { auth, push }: ChannelRoutesDeps): void {
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
        'docs/protocol.md 3 when required; a signed hello, then MAC-ed heartbeat calls and pushes ' +
        '(docs/protocol.md "Realtime channel")',
      tag: 'client',
      auth: 'client',
    },
  });
}
