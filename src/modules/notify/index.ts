// The notify module's public surface: live events, dashboard live streams and webhooks.
// Other modules and the composition root import only this file.
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Router } from '../../platform/http/router.js';
import type { HttpServer } from '../../platform/http/uws.js';
import { AppError } from '../../errors.js';
import { EventBus } from './events.js';
import { LiveHub } from './live.js';
import { WebhookRepository } from './webhook.repository.js';
import { WebhookService } from './webhooks.service.js';
import { DeliveryRepository } from './delivery.repository.js';
import { deliveriesRoutes } from './deliveries.routes.js';
import type { DashboardAuth, Principal } from '../access/index.js';

export type { LiveEvent } from './events.js';
export { assertWebhookUrl, isPublicAddress } from './webhook-url.js';
export type { EventBus, LiveHub, WebhookService };

type WebhookDeps = ConstructorParameters<typeof WebhookService>[0];
type LiveDeps = ConstructorParameters<typeof LiveHub>[0];

interface NotifyDeps extends Omit<WebhookDeps, 'targets' | 'deliveries'> {
  sql: Sql;
  coordinator: Coordinator;
}

/** Builds the notify module: the live event bus and outgoing webhooks; the dashboard's live streams at mount. */
export function createNotify({ sql, coordinator, ...webhookDeps }: NotifyDeps) {
  const events = new EventBus(coordinator, webhookDeps.now, webhookDeps.log);
  const deliveries = new DeliveryRepository(sql);
  const webhooks = new WebhookService({ targets: new WebhookRepository(sql), deliveries, ...webhookDeps });
  return {
    events,
    webhooks,
    /** The webhook delivery log's routes (docs/api.md "Webhooks"). */
    mountDeliveries(
      router: Router,
      d: { auth: DashboardAuth; mayRead: (p: Principal, accountId: string) => Promise<boolean> },
    ): void {
      deliveriesRoutes(router, { ...d, deliveries, webhooks });
    },
    /** The dashboard's live streams (WebSocket and Server-Sent Events), started and mounted. */
    mountLive(server: HttpServer, d: Omit<LiveDeps, 'events'>): LiveHub {
      const live = new LiveHub({ ...d, events });
      live.start();
      live.mount(server);
      return live;
    },
    /** The live streams in the API document: served by the WebSocket and SSE handlers, not the router. */
    liveDocs(router: Router): void {
      const notHere = async () => {
        throw new AppError('route_not_found');
      };
      router.add({
        method: 'get',
        path: '/api/ws',
        docOnly: true,
        handler: notHere,
        doc: {
          summary:
            'WebSocket: send {"type":"subscribe","app_id"}; ' +
            'receive {"type":"event","event":{id,kind,app_id,at,data}}; ' +
            'subprotocol msgpack for MessagePack frames',
          tag: 'live',
          auth: 'dashboard',
          permission: 'any account the app is visible to',
        },
      });
      router.add({
        method: 'get',
        path: '/api/apps/:id/events',
        docOnly: true,
        handler: notHere,
        doc: {
          summary: 'Server-Sent Events: one `event:` per kind',
          tag: 'live',
          auth: 'dashboard',
          permission: 'any account the app is visible to',
        },
      });
    },
  };
}
