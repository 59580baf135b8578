// API shapes of products and orders (snake_case, ISO timestamps).
import { toDate } from '../../platform/db/sql.js';
import type { OrderRow, ProductRow } from './commerce.repository.js';

/** A product as its managers see it: the webhook secret opened (they paste it into the shop). */
export function productView(p: ProductRow, webhookSecret: string) {
  return {
    id: p.id,
    app_id: p.app_id,
    name: p.name,
    duration: p.duration_unit === 'lifetime' ? null : p.duration_value,
    unit: p.duration_unit,
    level: p.level,
    mask: p.mask,
    alphabet: p.alphabet,
    entitlements: p.entitlements,
    note: p.note,
    webhook_secret: webhookSecret,
    stripe_webhook_path: `/api/fulfil/stripe/${p.id}`,
    dynamic_webhook_path: `/api/fulfil/dynamic/${p.id}`,
    created_at: toDate(p.created_at)!.toISOString(),
    updated_at: toDate(p.updated_at)!.toISOString(),
  };
}

/** An order on the dashboard: its keys by preview only (the plaintext is the buyer's). */
export function orderView(o: OrderRow, previews: ReadonlyMap<string, string>) {
  return {
    id: o.id,
    app_id: o.app_id,
    product_id: o.product_id,
    product_name: o.product_name,
    provider: o.provider,
    external_id: o.external_id,
    email: o.email,
    license_ids: o.license_ids,
    keys: o.license_ids.map((id) => ({ license_id: id, key_preview: previews.get(id) ?? null })),
    created_at: toDate(o.created_at)!.toISOString(),
  };
}
