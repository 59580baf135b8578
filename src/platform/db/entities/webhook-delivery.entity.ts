import { EntitySchema } from '@mikro-orm/core';

/**
 * One attempt to deliver an alert webhook (docs/api.md "Webhook deliveries"): what was sent, where,
 * and what came back. The body is kept so the delivery can be sent again with a fresh signature.
 * Rows older than 30 days are pruned by the notify module.
 */
export interface WebhookDelivery {
  id: string;
  /** The account whose webhook it is (its secret signs the delivery). */
  accountId: string;
  appId: string;
  event: string;
  eventId: string;
  url: string;
  attempt: number;
  status: number | null;
  error: string | null;
  latencyMs: number;
  responseExcerpt: string;
  contentType: string;
  body: Buffer;
  at: Date;
}

export const WebhookDeliverySchema = new EntitySchema<WebhookDelivery>({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  indexes: [{ properties: ['accountId', 'at', 'id'] }, { properties: ['at'] }],
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true },
    accountId: { type: 'uuid' },
    appId: { type: 'uuid' },
    event: { type: 'string', length: 64 },
    eventId: { type: 'uuid' },
    url: { type: 'string', length: 4096 },
    attempt: { type: 'integer' },
    status: { type: 'integer', nullable: true },
    error: { type: 'string', length: 200, nullable: true },
    latencyMs: { type: 'integer' },
    responseExcerpt: { type: 'text' },
    contentType: { type: 'string', length: 200 },
    body: { type: 'blob' },
    at: { type: 'datetime' },
  },
});
