// Products on the dashboard (docs/protocol.md 14.4): owners, admins and developers of the app manage them.
// A product's webhook secret is 32 random bytes (hex), sealed at rest; the dashboard shows it opened.
import { AppError } from '../../errors.js';
import { randomHex, secretboxOpen, secretboxSeal } from '../../platform/crypto/index.js';
import { actorOf, productsPolicy, type Principal } from '../access/index.js';
import type { AppsService } from '../apps/index.js';
import type { AuditRepository } from '../audit/index.js';
import { settleKeySpec } from '../keys/index.js';
import type { CommerceRepository, ProductFields, ProductRow } from './commerce.repository.js';
import type { ProductInput, ProductPatch } from './commerce.requests.js';
import { orderView, productView } from './commerce.view.js';

const ORDER_LIST_LIMIT = 500;

interface ProductsDeps {
  repo: CommerceRepository;
  apps: Pick<AppsService, 'visible'>;
  /** The keys module's previews of keys by id (a port compose.ts fills). */
  previews: (ids: readonly string[]) => Promise<ReadonlyMap<string, string>>;
  audit: AuditRepository;
  /** secretbox key of secrets at rest (Secrets.sealKey). */
  sealKey: Buffer;
  now: () => number;
}

export function sealText(text: string, key: Buffer): string {
  return secretboxSeal(Buffer.from(text, 'utf8'), key).toString('base64');
}

export function openText(sealed: string, key: Buffer): string {
  const opened = secretboxOpen(Buffer.from(sealed, 'base64'), key);
  // Sealed under another key (a deployment that lost its two-factor key): nothing can verify.
  if (!opened) throw new Error('a sealed secret does not open under this deployment key');
  return opened.toString('utf8');
}

/** The stored fields of a product from a body, checked by the generator's own rules (422 on the field). */
function fieldsOf(input: ProductInput): Omit<ProductFields, 'webhook_secret'> {
  const spec = settleKeySpec(input);
  return {
    name: input.name,
    duration_value: spec.value,
    duration_unit: spec.unit,
    level: input.level ?? 1,
    mask: spec.mask,
    alphabet: spec.alphabet,
    entitlements: input.entitlements ?? [],
    note: input.note ?? '',
  };
}

export class ProductsService {
  constructor(private readonly d: ProductsDeps) {}

  private async managed(p: Principal, appId: string): Promise<void> {
    productsPolicy.assertManage(p);
    await this.d.apps.visible(p, appId);
  }

  /** A product of an app the caller manages; 404 otherwise (ids of other trees don't leak). */
  private async product(p: Principal, id: string): Promise<ProductRow> {
    productsPolicy.assertManage(p);
    const row = await this.d.repo.findProduct(id);
    if (!row) throw new AppError('product_not_found');
    await this.d.apps.visible(p, row.app_id).catch((err: unknown) => {
      throw err instanceof AppError && err.code === 'token_scope' ? err : new AppError('product_not_found');
    });
    return row;
  }

  view(row: ProductRow) {
    return productView(row, openText(row.webhook_secret, this.d.sealKey));
  }

  async create(p: Principal, appId: string, input: ProductInput) {
    await this.managed(p, appId);
    const row = await this.d.repo.createProduct(
      appId,
      { ...fieldsOf(input), webhook_secret: sealText(randomHex(32), this.d.sealKey) },
      p.account.id,
      new Date(this.d.now()),
    );
    this.d.audit.write({ appId, action: 'product.create', detail: `Product "${row.name}" created`, actor: actorOf(p) });
    return this.view(row);
  }

  async list(p: Principal, appId: string) {
    await this.managed(p, appId);
    return (await this.d.repo.listProducts(appId)).map((r) => this.view(r));
  }

  async get(p: Principal, id: string) {
    return this.view(await this.product(p, id));
  }

  async update(p: Principal, id: string, patch: ProductPatch) {
    const row = await this.product(p, id);
    const { webhook_secret: secret, ...settings } = patch;
    const merged: ProductInput = {
      name: patch.name ?? row.name,
      ...(row.duration_unit === 'lifetime' ? {} : { duration: row.duration_value }),
      unit: row.duration_unit,
      level: row.level,
      mask: row.mask,
      alphabet: row.alphabet,
      entitlements: row.entitlements,
      note: row.note,
      ...settings,
    };
    const updated = await this.d.repo.updateProduct(
      id,
      { ...fieldsOf(merged), ...(secret ? { webhook_secret: sealText(secret, this.d.sealKey) } : {}) },
      new Date(this.d.now()),
    );
    if (!updated) throw new AppError('product_not_found');
    this.d.audit.write({
      appId: row.app_id,
      action: 'product.update',
      detail: `Product "${updated.name}" changed: ${Object.keys(patch).join(', ')}`,
      actor: actorOf(p),
    });
    return this.view(updated);
  }

  /** Orders of a deleted product stay listed and readable (they keep the product's name). */
  async remove(p: Principal, id: string): Promise<void> {
    const row = await this.product(p, id);
    if (!(await this.d.repo.deleteProduct(id))) throw new AppError('product_not_found');
    this.d.audit.write({
      appId: row.app_id,
      action: 'product.delete',
      detail: `Product "${row.name}" deleted`,
      actor: actorOf(p),
      level: 'warning',
    });
  }

  /** A new webhook secret: deliveries signed with the old one are refused at once. */
  async rotateSecret(p: Principal, id: string) {
    const row = await this.product(p, id);
    const updated = await this.d.repo.updateProduct(
      id,
      { webhook_secret: sealText(randomHex(32), this.d.sealKey) },
      new Date(this.d.now()),
    );
    if (!updated) throw new AppError('product_not_found');
    this.d.audit.write({
      appId: row.app_id,
      action: 'product.rotate_secret',
      detail: `Webhook secret of product "${row.name}" rotated`,
      actor: actorOf(p),
    });
    return this.view(updated);
  }

  /** docs/protocol.md 14.7: newest first, with the keys' previews. */
  async orders(p: Principal, appId: string) {
    await this.managed(p, appId);
    const rows = await this.d.repo.listOrders(appId, ORDER_LIST_LIMIT);
    const previews = await this.d.previews(rows.flatMap((r) => r.license_ids));
    return rows.map((r) => orderView(r, previews));
  }
}
