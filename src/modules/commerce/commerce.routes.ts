import type { Router } from '../../platform/http/router.js';
import { pathId } from '../../platform/http/validation.js';
import { jsonReply, textReply } from '../../platform/http/types.js';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import { consumeOrThrow } from '../../platform/limits/lockout.js';
import { AppError, rateLimited } from '../../errors.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import { CreateProductBody, PatchProductBody } from './commerce.requests.js';
import type { FulfilService } from './fulfil.service.js';
import type { ProductsService } from './products.service.js';

/** Fulfilment webhooks carry a shop's whole event (Stripe's run to tens of KiB); 1 MiB is refused. */
const FULFIL_BODY_LIMIT = 256 * 1024;

interface CommerceRoutesDeps {
  auth: DashboardAuth;
  products: ProductsService;
  fulfil: FulfilService;
  /** The portal's per-IP budget (20 a minute): order pages cannot be guessed at speed. */
  portalLimiter: RequestLimiter;
}

const MANAGERS = 'owner, admin, developer';

export function commerceRoutes(router: Router, { auth, products, fulfil, portalLimiter }: CommerceRoutesDeps): void {
  const prod = (id: string | undefined) => pathId(id, 'product_not_found');
  const app = (id: string | undefined) => pathId(id, 'app_not_found');
  router.add({
    method: 'post',
    path: '/api/apps/:id/products',
    doc: {
      summary: 'Create a product (what a shop sells; returns its webhook secret)',
      tag: 'apps',
      auth: 'dashboard',
      body: CreateProductBody,
      permission: MANAGERS,
    },
    handler: dashboardHandler({ auth, body: CreateProductBody }, async ({ principal, params, body }) =>
      products.create(principal, app(params.id), body),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/products',
    doc: { summary: "An application's products", tag: 'apps', auth: 'dashboard', permission: MANAGERS },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => products.list(principal, app(params.id))),
  });
  router.add({
    method: 'get',
    path: '/api/products/:id',
    doc: { summary: 'One product', tag: 'apps', auth: 'dashboard', permission: MANAGERS },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => products.get(principal, prod(params.id))),
  });
  router.add({
    method: 'patch',
    path: '/api/products/:id',
    doc: { summary: 'Change a product', tag: 'apps', auth: 'dashboard', body: PatchProductBody, permission: MANAGERS },
    handler: dashboardHandler({ auth, body: PatchProductBody }, async ({ principal, params, body }) =>
      products.update(principal, prod(params.id), body),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/products/:id',
    doc: { summary: 'Delete a product (its orders stay)', tag: 'apps', auth: 'dashboard', permission: MANAGERS },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await products.remove(principal, prod(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'post',
    path: '/api/products/:id/rotate-secret',
    doc: { summary: 'A new webhook secret for a product', tag: 'apps', auth: 'dashboard', permission: MANAGERS },
    handler: dashboardHandler({ auth }, async ({ principal, params }) =>
      products.rotateSecret(principal, prod(params.id)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/orders',
    doc: {
      summary: "Orders, newest first, with their keys' previews",
      tag: 'apps',
      auth: 'dashboard',
      permission: MANAGERS,
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => products.orders(principal, app(params.id))),
  });
  router.add({
    method: 'post',
    path: '/api/fulfil/stripe/:product_id',
    bodyLimit: FULFIL_BODY_LIMIT,
    doc: {
      summary: 'Stripe webhook (checkout.session.completed creates the keys; Stripe-Signature verified)',
      tag: 'fulfil',
      auth: 'none',
      responses: {
        200: 'Fulfilled, a repeat, or {"ignored": true}',
        400: 'Invalid signature',
        404: 'Product not found',
      },
    },
    handler: async (req) => {
      if (req.body === 'too_large') throw new AppError('payload_too_large');
      return jsonReply(
        200,
        await fulfil.stripe(prod(req.params.product_id), req.body, req.headers['stripe-signature']),
      );
    },
  });
  router.add({
    method: 'post',
    path: '/api/fulfil/dynamic/:product_id',
    bodyLimit: FULFIL_BODY_LIMIT,
    doc: {
      summary: 'Dynamic delivery: the keys as text/plain, one per line (X-Keywarden-Fulfil-Signature verified)',
      tag: 'fulfil',
      auth: 'none',
      responses: { 200: 'The keys, one per line', 400: 'Invalid signature', 404: 'Product not found' },
    },
    handler: async (req) => {
      if (req.body === 'too_large') throw new AppError('payload_too_large');
      return textReply(
        200,
        await fulfil.dynamic(prod(req.params.product_id), req.body, req.headers['x-keywarden-fulfil-signature']),
      );
    },
  });
  router.add({
    method: 'get',
    path: '/api/portal/orders/:external_id',
    doc: {
      summary: "A Stripe Checkout buyer's keys (30 days)",
      tag: 'portal',
      auth: 'none',
      responses: { 200: '{"product", "keys", "created_at"}', 404: 'Order not found', 429: 'Rate limit exceeded' },
    },
    handler: async (req) => {
      await consumeOrThrow(portalLimiter, req.ip, rateLimited);
      const id = req.params.external_id ?? '';
      // No order id holds a control character (PostgreSQL text cannot even hold NUL): unknown, not a 503.
      if (id.length === 0 || id.length > 255 || /[\u0000-\u001f\u007f]/.test(id)) throw new AppError('order_not_found');
      return jsonReply(200, await fulfil.buyerOrder(id), { 'Cache-Control': 'no-store' });
    },
  });
}
