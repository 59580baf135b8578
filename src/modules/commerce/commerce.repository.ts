// Products and orders in PostgreSQL (docs/protocol.md 14.4-14.7). An order row is claimed per provider event
// inside the transaction that writes its keys: the unique (provider, event_id) makes a concurrent
// repeat wait for the first delivery and then find it, so keys are created once.
import { randomUUID } from 'node:crypto';
import type { DurationUnit } from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';

export interface ProductRow {
  id: string;
  app_id: string;
  name: string;
  duration_value: number;
  duration_unit: DurationUnit;
  level: number;
  mask: string;
  alphabet: string;
  entitlements: string[];
  note: string;
  webhook_secret: string;
  created_by: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const PRODUCT_COLUMNS = `id, app_id, name, duration_value, duration_unit, level, mask, alphabet, entitlements, note,
  webhook_secret, created_by, created_at, updated_at`;

export interface OrderRow {
  id: string;
  app_id: string;
  product_id: string | null;
  product_name: string;
  provider: string;
  external_id: string;
  email: string;
  license_ids: string[];
  keys_sealed: string | null;
  keys_until: Date | string;
  created_at: Date | string;
}

const ORDER_COLUMNS = `id, app_id, product_id, product_name, provider, external_id, email, license_ids, keys_sealed,
  keys_until, created_at`;

export type ProductFields = Omit<ProductRow, 'id' | 'app_id' | 'created_by' | 'created_at' | 'updated_at'>;

interface NewOrder {
  appId: string;
  productId: string;
  productName: string;
  provider: string;
  externalId: string;
  eventId: string;
  email: string;
  keysUntil: Date;
  createdAt: Date;
}

/** Raised inside an order's transaction when its event was fulfilled already (the keys roll back). */
export class AlreadyFulfilled extends Error {
  constructor() {
    super('order already fulfilled');
  }
}

export class CommerceRepository {
  constructor(private readonly sql: Sql) {}

  async createProduct(appId: string, f: ProductFields, createdBy: string, now: Date): Promise<ProductRow> {
    const row = await this.sql.one<ProductRow>(
      `insert into products (id, app_id, name, duration_value, duration_unit, level, mask, alphabet, entitlements,
         note, webhook_secret, created_by, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?) returning ${PRODUCT_COLUMNS}`,
      [
        randomUUID(),
        appId,
        f.name,
        f.duration_value,
        f.duration_unit,
        f.level,
        f.mask,
        f.alphabet,
        JSON.stringify(f.entitlements),
        f.note,
        f.webhook_secret,
        createdBy,
        now,
        now,
      ],
    );
    return row!;
  }

  findProduct(id: string): Promise<ProductRow | undefined> {
    return this.sql.one<ProductRow>(`select ${PRODUCT_COLUMNS} from products where id = ?`, [id]);
  }

  listProducts(appId: string): Promise<ProductRow[]> {
    return this.sql.all<ProductRow>(
      `select ${PRODUCT_COLUMNS} from products where app_id = ? order by created_at asc, id asc`,
      [appId],
    );
  }

  async updateProduct(id: string, f: Partial<ProductFields>, now: Date): Promise<ProductRow | undefined> {
    const sets: string[] = ['updated_at = ?'];
    const params: unknown[] = [now];
    for (const [k, v] of Object.entries(f)) {
      if (v === undefined) continue;
      sets.push(k === 'entitlements' ? `${k} = ?::jsonb` : `${k} = ?`);
      params.push(k === 'entitlements' ? JSON.stringify(v) : v);
    }
    params.push(id);
    return this.sql.one<ProductRow>(
      `update products set ${sets.join(', ')} where id = ? returning ${PRODUCT_COLUMNS}`,
      params,
    );
  }

  async deleteProduct(id: string): Promise<boolean> {
    return (await this.sql.run('delete from products where id = ?', [id])) > 0;
  }

  /** Claims an event for a new order inside `tx`; a repeat (even one in flight) throws AlreadyFulfilled. */
  async claimOrder(tx: unknown, o: NewOrder): Promise<string> {
    const row = await this.sql.one<{ id: string }>(
      `insert into orders (id, app_id, product_id, product_name, provider, external_id, event_id, email, keys_until,
         created_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (provider, event_id) do nothing returning id`,
      [
        randomUUID(),
        o.appId,
        o.productId,
        o.productName,
        o.provider,
        o.externalId,
        o.eventId,
        o.email,
        o.keysUntil,
        o.createdAt,
      ],
      tx,
    );
    if (!row) throw new AlreadyFulfilled();
    return row.id;
  }

  async completeOrder(tx: unknown, id: string, licenseIds: string[], keysSealed: string): Promise<void> {
    await this.sql.run(
      'update orders set license_ids = ?::jsonb, keys_sealed = ? where id = ?',
      [JSON.stringify(licenseIds), keysSealed, id],
      tx,
    );
  }

  findOrderByEvent(provider: string, eventId: string): Promise<OrderRow | undefined> {
    return this.sql.one<OrderRow>(`select ${ORDER_COLUMNS} from orders where provider = ? and event_id = ?`, [
      provider,
      eventId,
    ]);
  }

  /** The newest order of a provider with this external id whose keys are still kept (after `now`). */
  findKeptOrder(provider: string, externalId: string, now: Date): Promise<OrderRow | undefined> {
    return this.sql.one<OrderRow>(
      `select ${ORDER_COLUMNS} from orders
       where provider = ? and external_id = ? and keys_until > ? and keys_sealed is not null
       order by created_at desc limit 1`,
      [provider, externalId, now],
    );
  }

  listOrders(appId: string, limit: number): Promise<OrderRow[]> {
    return this.sql.all<OrderRow>(
      `select ${ORDER_COLUMNS} from orders where app_id = ? order by created_at desc, id desc limit ?`,
      [appId, limit],
    );
  }

  /** The application a product belongs to; null when there is none. */
  async appOfProduct(id: string): Promise<string | null> {
    const row = await this.sql.one<{ app_id: string }>('select app_id from products where id = ?', [id]);
    return row?.app_id ?? null;
  }

  /** Forgets the plaintext keys of orders past their 30 days (the order itself stays listed). */
  async purgeExpiredKeys(now: Date): Promise<number> {
    return this.sql.run('update orders set keys_sealed = null where keys_sealed is not null and keys_until <= ?', [
      now,
    ]);
  }
}
