// The webhook delivery log on the dashboard (docs/api.md "Webhook deliveries"): an account reads the
// attempts made to its own webhook; an owner also those of any account in its tree. A delivery can
// be sent again.
import { Type } from '@sinclair/typebox';
import { AppError } from '../../errors.js';
import type { Router } from '../../platform/http/router.js';
import { dashboardHandler, type DashboardAuth, type Principal } from '../access/index.js';
import type { DeliveryRepository, StoredDelivery } from './delivery.repository.js';
import type { WebhookService } from './webhooks.service.js';

const DeliveriesQuery = Type.Object(
  {
    account_id: Type.Optional(Type.String({ pattern: '^[0-9a-fA-F-]{36}$' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    // delivery ids are bigints: 18 digits stay below 2^63 - 1
    before: Type.Optional(Type.String({ pattern: '^[0-9]{1,18}$' })),
  },
  { additionalProperties: false },
);

interface DeliveriesRoutesDeps {
  auth: DashboardAuth;
  deliveries: DeliveryRepository;
  webhooks: WebhookService;
  /** Whether the caller may read the delivery log of that account (its own; an owner's tree). */
  mayRead: (p: Principal, accountId: string) => Promise<boolean>;
}

function deliveryView(d: StoredDelivery) {
  return {
    id: d.id,
    event: d.event,
    event_id: d.eventId,
    url: d.url,
    attempt: d.attempt,
    status: d.status,
    error: d.error,
    latency_ms: d.latencyMs,
    response_excerpt: d.responseExcerpt,
    at: d.at.toISOString(),
  };
}

export function deliveriesRoutes(router: Router, deps: DeliveriesRoutesDeps): void {
  const { auth, deliveries, webhooks, mayRead } = deps;

  router.add({
    method: 'get',
    path: '/api/account/webhook/deliveries',
    doc: {
      summary:
        "Attempts to deliver the caller's webhook, newest first (an owner: ?account_id= of its tree); " +
        'kept 30 days; before: the last id seen',
      tag: 'account',
      auth: 'dashboard',
      query: DeliveriesQuery,
      permission: 'any signed-in account',
    },
    handler: dashboardHandler({ auth, query: DeliveriesQuery }, async ({ principal, query }) => {
      const accountId = query.account_id?.toLowerCase() ?? principal.account.id;
      if (!(await mayRead(principal, accountId))) throw new AppError('account_not_found');
      return (await deliveries.list(accountId, query.limit ?? 100, query.before)).map(deliveryView);
    }),
  });
  router.add({
    method: 'post',
    path: '/api/webhook-deliveries/:id/redeliver',
    doc: {
      summary: 'Send a delivered event again now (same event id and body, a fresh signature); the new delivery',
      tag: 'account',
      auth: 'dashboard',
      permission: 'whoever may read the delivery',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      const id = params.id && /^[0-9]{1,18}$/.test(params.id) ? params.id : undefined;
      const found = id ? await deliveries.find(id) : undefined;
      if (!found || !(await mayRead(principal, found.accountId))) throw new AppError('delivery_not_found');
      return deliveryView(await webhooks.redeliver(found));
    }),
  });
}
