import { EntitySchema } from '@mikro-orm/core';
import type { DurationUnit } from './license-key.entity.js';

/**
 * What a shop sells (docs/protocol.md 14.4): the generation settings of the keys an order creates, and the
 * secret its webhooks are signed with (sealed with secretbox, never stored in the clear).
 */
export interface Product {
  id: string;
  appId: string;
  name: string;
  durationValue: number;
  durationUnit: DurationUnit;
  level: number;
  mask: string;
  alphabet: string;
  entitlements: string[];
  note: string;
  webhookSecret: string;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ProductSchema = new EntitySchema<Product>({
  name: 'Product',
  tableName: 'products',
  properties: {
    id: { type: 'uuid', primary: true },
    appId: {
      kind: 'm:1',
      entity: 'Application',
      mapToPk: true,
      fieldName: 'app_id',
      deleteRule: 'cascade',
      index: true,
    },
    name: { type: 'string', length: 4096 },
    durationValue: { type: 'integer' },
    durationUnit: { type: 'string', length: 8 },
    level: { type: 'integer', default: 1 },
    mask: { type: 'string', length: 128 },
    alphabet: { type: 'string', length: 256 },
    entitlements: { type: 'json', default: '[]' },
    note: { type: 'text', default: '' },
    webhookSecret: { type: 'text' },
    createdBy: { type: 'uuid', nullable: true },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
  },
});

/**
 * A fulfilled order (docs/protocol.md 14.5-14.7). `eventId` makes a provider's event count once (unique);
 * the keys' plaintext is kept sealed until `keysUntil` (30 days) for the buyer's order page.
 * The product may be deleted later: the order keeps its name and stays readable.
 */
export interface Order {
  id: string;
  appId: string;
  productId: string | null;
  productName: string;
  provider: string;
  externalId: string;
  eventId: string;
  email: string;
  licenseIds: string[];
  keysSealed: string | null;
  keysUntil: Date;
  createdAt: Date;
}

export const OrderSchema = new EntitySchema<Order>({
  name: 'Order',
  tableName: 'orders',
  uniques: [{ properties: ['provider', 'eventId'] }],
  indexes: [{ properties: ['appId', 'createdAt'] }, { properties: ['provider', 'externalId'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    productId: {
      kind: 'm:1',
      entity: 'Product',
      mapToPk: true,
      fieldName: 'product_id',
      deleteRule: 'set null',
      nullable: true,
    },
    productName: { type: 'string', length: 4096 },
    provider: { type: 'string', length: 16 },
    externalId: { type: 'string', length: 255 },
    eventId: { type: 'string', length: 300 },
    email: { type: 'string', length: 320, default: '' },
    licenseIds: { type: 'json', default: '[]' },
    keysSealed: { type: 'text', nullable: true },
    keysUntil: { type: 'datetime' },
    createdAt: { type: 'datetime' },
  },
});

/** A customer's portal sign-in (docs/protocol.md 14.1): the token's SHA-256, the key (and end user) it shows. */
export interface PortalSession {
  tokenHash: string;
  appId: string;
  licenseId: string;
  userId: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export const PortalSessionSchema = new EntitySchema<PortalSession>({
  name: 'PortalSession',
  tableName: 'portal_sessions',
  properties: {
    tokenHash: { type: 'string', length: 64, primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    licenseId: {
      kind: 'm:1',
      entity: 'LicenseKey',
      mapToPk: true,
      fieldName: 'license_id',
      deleteRule: 'cascade',
      index: true,
    },
    userId: { type: 'uuid', nullable: true },
    createdAt: { type: 'datetime' },
    expiresAt: { type: 'datetime', index: true },
  },
});

/** When a key's customer last reset its devices from the portal (the cooldown, docs/protocol.md 14.3). */
export interface PortalReset {
  licenseId: string;
  resetAt: Date;
}

export const PortalResetSchema = new EntitySchema<PortalReset>({
  name: 'PortalReset',
  tableName: 'portal_resets',
  properties: {
    licenseId: {
      kind: 'm:1',
      entity: 'LicenseKey',
      mapToPk: true,
      fieldName: 'license_id',
      deleteRule: 'cascade',
      primary: true,
    },
    resetAt: { type: 'datetime' },
  },
});
