// Order fulfilment (docs/protocol.md 14.5-14.7): a shop's signed webhook becomes keys, once per event.
// The order row is claimed in the keys' own transaction (unique provider + event id): a concurrent
// repeat waits for the first delivery's commit, then finds the event taken and creates nothing.
// The keys' plaintext is kept sealed for 30 days: the buyer's order page and a repeated dynamic
// delivery answer with it; after that only the order and its keys' previews remain.
import type { Logger } from 'pino';
import { AppError, validationError } from '../../errors.js';
import type { AuditRepository } from '../audit/index.js';
import type { KeyGenerator } from '../keys/index.js';
import { AlreadyFulfilled, type CommerceRepository, type ProductRow } from './commerce.repository.js';
import { openText, sealText } from './products.service.js';
import { verifyFulfilSignature, verifyStripeSignature } from './signatures.js';
import { parseJson } from '../../platform/http/validation.js';
import { toDate } from '../../platform/db/sql.js';

/** How long an order's plaintext keys are kept for the buyer. */
const ORDER_KEYS_KEPT_MS = 30 * 86_400_000;
const MAX_QUANTITY = 100;
const PURGE_EVERY_MS = 3_600_000;

interface FulfilDeps {
  repo: CommerceRepository;
  generator: Pick<KeyGenerator, 'generateForOrder'>;
  audit: AuditRepository;
  sealKey: Buffer;
  log: Logger;
  now: () => number;
}

type Json = Record<string, unknown>;

const obj = (v: unknown): Json | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : undefined;

/** A quantity as a shop sends it (a number, or text in Stripe's metadata): 1 to 100, absent 1. */
function quantityOf(v: unknown, loc: string[]): number {
  if (v === undefined || v === null || v === '') return 1;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d{1,9}\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_QUANTITY)
    throw validationError(loc, `Quantity must be a whole number from 1 to ${MAX_QUANTITY}`, 'value_error');
  return n;
}

/** An order id as a shop sends it (text or a number): 1 to 255 characters. */
function orderIdOf(v: unknown, loc: string[]): string {
  const s = typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : v;
  if (typeof s !== 'string' || s.length === 0 || s.length > 255 || s.includes('\u0000'))
    throw validationError(loc, 'An order id (1 to 255 characters) is required', 'missing');
  return s;
}

export class FulfilService {
  private purge: NodeJS.Timeout | undefined;

  constructor(private readonly d: FulfilDeps) {}

  start(): void {
    const run = () =>
      this.d.repo
        .purgeExpiredKeys(new Date(this.d.now()))
        .catch((err: unknown) => this.d.log.warn({ err }, 'order.purge_failed'));
    void run();
    this.purge = setInterval(run, PURGE_EVERY_MS).unref();
  }

  stop(): void {
    clearInterval(this.purge);
  }

  private async productFor(id: string): Promise<ProductRow> {
    const p = await this.d.repo.findProduct(id);
    if (!p) throw new AppError('product_not_found');
    return p;
  }

  /** POST /api/fulfil/stripe/{product_id}. */
  async stripe(productId: string, raw: Buffer, signature: string | undefined): Promise<Json> {
    const product = await this.productFor(productId);
    const secret = openText(product.webhook_secret, this.d.sealKey);
    if (!verifyStripeSignature(signature, raw, secret, Math.floor(this.d.now() / 1000)))
      throw new AppError('fulfil_signature_invalid');
    const event = obj(parseJson(raw)) ?? {};
    if (event.type !== 'checkout.session.completed') return { ignored: true };
    const session = obj(obj(event.data)?.object);
    const eventId = orderIdOf(event.id, ['id']);
    const externalId = orderIdOf(session?.id, ['data', 'object', 'id']);
    const quantity = quantityOf(obj(session?.metadata)?.quantity, ['data', 'object', 'metadata', 'quantity']);
    const email = obj(session?.customer_details)?.email;
    const order = await this.fulfil(product, {
      provider: 'stripe',
      externalId,
      eventId,
      quantity,
      email: typeof email === 'string' ? email.slice(0, 320) : '',
    });
    return order.created ? { success: true, created: order.keys?.length ?? 0 } : { success: true, duplicate: true };
  }

  /** POST /api/fulfil/dynamic/{product_id}: the keys, one per line; a repeated order id, the same keys. */
  async dynamic(productId: string, raw: Buffer, signature: string | undefined): Promise<string> {
    const product = await this.productFor(productId);
    const secret = openText(product.webhook_secret, this.d.sealKey);
    if (!verifyFulfilSignature(signature, raw, secret)) throw new AppError('fulfil_signature_invalid');
    const body = obj(parseJson(raw)) ?? {};
    const data = obj(body.data);
    const externalId =
      body.order_id !== undefined
        ? orderIdOf(body.order_id, ['order_id'])
        : orderIdOf(data?.uniqid, ['data', 'uniqid']);
    const quantity =
      body.quantity !== undefined
        ? quantityOf(body.quantity, ['quantity'])
        : quantityOf(data?.quantity, ['data', 'quantity']);
    const email = typeof data?.customer_email === 'string' ? data.customer_email : body.email;
    const order = await this.fulfil(product, {
      provider: 'dynamic',
      externalId,
      eventId: externalId,
      quantity,
      email: typeof email === 'string' ? email.slice(0, 320) : '',
    });
    // Past its 30 days a repeated order's keys are gone: it is answered like an unknown order.
    if (!order.keys) throw new AppError('order_not_found');
    return order.keys.join('\n') + '\n';
  }

  /**
   * Creates the order's keys once per (product, event); a repeat answers the first delivery's keys
   * (while they are kept) and creates none.
   */
  private async fulfil(
    product: ProductRow,
    o: { provider: string; externalId: string; eventId: string; quantity: number; email: string },
  ): Promise<{ created: boolean; keys: string[] | null }> {
    const now = this.d.now();
    const eventId = `${product.id}:${o.eventId}`;
    let orderId = '';
    try {
      const created = await this.d.generator.generateForOrder(
        product.app_id,
        {
          duration: product.duration_unit === 'lifetime' ? undefined : product.duration_value,
          unit: product.duration_unit,
          level: product.level,
          mask: product.mask,
          alphabet: product.alphabet,
          entitlements: product.entitlements,
          // docs/protocol.md 14.7: an order's keys say where they came from (the product's own note stays on it).
          note: `order ${o.provider} ${o.externalId}`,
        },
        o.quantity,
        {
          first: async (tx) => {
            orderId = await this.d.repo.claimOrder(tx, {
              appId: product.app_id,
              productId: product.id,
              productName: product.name,
              provider: o.provider,
              externalId: o.externalId,
              eventId,
              email: o.email,
              keysUntil: new Date(now + ORDER_KEYS_KEPT_MS),
              createdAt: new Date(now),
            });
          },
          last: (tx, keys) =>
            this.d.repo.completeOrder(
              tx,
              orderId,
              keys.map((k) => k.row.id),
              sealText(JSON.stringify(keys.map((k) => k.key)), this.d.sealKey),
            ),
        },
      );
      this.d.audit.write({
        appId: product.app_id,
        action: 'order.fulfilled',
        detail: `Order ${o.provider} ${o.externalId}: ${created.length} keys of product "${product.name}"`,
      });
      return { created: true, keys: created.map((c) => c.key) };
    } catch (err) {
      if (!(err instanceof AlreadyFulfilled)) throw err;
      const prior = await this.d.repo.findOrderByEvent(o.provider, eventId);
      const kept =
        prior?.keys_sealed && toDate(prior.keys_until)!.getTime() > this.d.now()
          ? (JSON.parse(openText(prior.keys_sealed, this.d.sealKey)) as string[])
          : null;
      return { created: false, keys: kept };
    }
  }

  /** GET /api/portal/orders/{external_id}: a Stripe Checkout buyer's keys while they are kept. */
  async buyerOrder(externalId: string) {
    const o = await this.d.repo.findKeptOrder('stripe', externalId, new Date(this.d.now()));
    if (!o?.keys_sealed) throw new AppError('order_not_found');
    return {
      product: o.product_name,
      keys: JSON.parse(openText(o.keys_sealed, this.d.sealKey)) as string[],
      created_at: toDate(o.created_at)!.toISOString(),
    };
  }
}
