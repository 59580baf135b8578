// The webhook delivery log (docs/api.md "Webhook deliveries"): one row per attempt, owned by the
// notify module. Listings run newest first by (at, id); `before` is the id of the last row seen.
import type { Sql } from '../../platform/db/sql.js';
import { toDate } from '../../platform/db/sql.js';
import type { WebhookDelivery } from '../../platform/db/entities/index.js';

/** Deliveries are kept this long. */
export const DELIVERY_RETENTION_MS = 30 * 24 * 3600_000;

/** A delivery as it is written: the entity's columns, the id given by the database. */
type DeliveryRecord = Omit<WebhookDelivery, 'id'>;

export type StoredDelivery = WebhookDelivery;

interface DeliveryRow {
  id: string;
  account_id: string;
  app_id: string;
  event: string;
  event_id: string;
  url: string;
  attempt: number;
  status: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string;
  content_type: string;
  body: Buffer | null;
  at: Date | string;
}

const COLUMNS = `id, account_id, app_id, event, event_id, url, attempt, status, error, latency_ms, response_excerpt,
  content_type, at`;

function fromRow(r: DeliveryRow): StoredDelivery {
  return {
    id: String(r.id),
    accountId: r.account_id,
    appId: r.app_id,
    event: r.event,
    eventId: r.event_id,
    url: r.url,
    attempt: r.attempt,
    status: r.status,
    error: r.error,
    latencyMs: r.latency_ms,
    responseExcerpt: r.response_excerpt,
    contentType: r.content_type,
    body: r.body ?? Buffer.alloc(0),
    at: toDate(r.at)!,
  };
}

export class DeliveryRepository {
  constructor(private readonly sql: Sql) {}

  async insert(d: DeliveryRecord): Promise<StoredDelivery> {
    const row = await this.sql.one<DeliveryRow>(
      `insert into webhook_deliveries (account_id, app_id, event, event_id, url, attempt, status, error, latency_ms,
         response_excerpt, content_type, body, at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ${COLUMNS}`,
      [
        d.accountId,
        d.appId,
        d.event,
        d.eventId,
        d.url,
        d.attempt,
        d.status,
        d.error,
        d.latencyMs,
        d.responseExcerpt,
        d.contentType,
        d.body,
        d.at,
      ],
    );
    return { ...fromRow(row!), body: d.body };
  }

  /** The account's deliveries, newest first; without the bodies. */
  async list(accountId: string, limit: number, before?: string): Promise<StoredDelivery[]> {
    const after = before
      ? `and (at, id) < (select at, id from webhook_deliveries where id = ? and account_id = ?)`
      : '';
    const rows = await this.sql.all<DeliveryRow>(
      `select ${COLUMNS}, null as body from webhook_deliveries where account_id = ? ${after}
       order by at desc, id desc limit ?`,
      before ? [accountId, before, accountId, limit] : [accountId, limit],
    );
    return rows.map(fromRow);
  }

  async find(id: string): Promise<StoredDelivery | undefined> {
    const row = await this.sql.one<DeliveryRow>(`select ${COLUMNS}, body from webhook_deliveries where id = ?`, [id]);
    return row && fromRow(row);
  }

  /** Deletes the deliveries older than `cutoff`; returns how many. */
  prune(cutoff: Date): Promise<number> {
    return this.sql.run(`delete from webhook_deliveries where at < ?`, [cutoff]);
  }
}
