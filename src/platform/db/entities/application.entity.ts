import { EntitySchema } from '@mikro-orm/core';

export const KEY_COST_TIERS = ['days:1', 'days:7', 'days:30', 'days:90', 'days:180', 'days:365', 'lifetime'] as const;
export type KeyCostTier = (typeof KEY_COST_TIERS)[number];
export const SESSION_OVERFLOWS = ['reject', 'kick_oldest'] as const;
export type SessionOverflow = (typeof SESSION_OVERFLOWS)[number];
export const EXPIRED_UPDATES = ['none', 'maintain'] as const;
export type ExpiredUpdates = (typeof EXPIRED_UPDATES)[number];
export type KeyCosts = Partial<Record<KeyCostTier, number>>;

/** docs/spec.md "Application" plus docs/protocol.md 2 (allowed_hashes) and 6 (heartbeat_interval). */
export interface Application {
  id: string;
  ownerId: string;
  name: string;
  version: string;
  description: string;
  enabled: boolean;
  disabledMessage: string;
  keysPaused: boolean;
  hwidLock: boolean;
  requireSignature: boolean;
  injectionDetection: boolean;
  requireHeartbeat: boolean;
  forceUpdate: boolean;
  updateUrl: string;
  updateMessage: string;
  forceEncryption: boolean;
  hashCheck: boolean;
  expectedBinaryHash: string;
  webhook: string;
  keyCosts: KeyCosts;
  allowedHashes: string[];
  heartbeatInterval: number;
  /** docs/protocol.md 12.2: live heartbeat sessions per key (0: unlimited) and what a start over it does. */
  maxSessions: number;
  sessionOverflow: SessionOverflow;
  /**
   * docs/protocol.md 12: devices per key, trials, offline files, grace (every default keeps docs/spec.md's behaviour).
   */
  maxDevices: number;
  trialHours: number;
  trialLevel: number;
  offlineDays: number;
  graceHours: number;
  /** docs/releases.md "Expired licenses": `none` (no updates once expired) or `maintain`. */
  expiredUpdates: ExpiredUpdates;
  /** docs/protocol.md 14.1: the customer portal, and the hours between two device resets of one customer. */
  portalEnabled: boolean;
  portalResetCooldownHours: number;
  apiKey: string;
  apiSecret: string;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ApplicationSchema = new EntitySchema<Application>({
  name: 'Application',
  tableName: 'applications',
  properties: {
    id: { type: 'uuid', primary: true },
    ownerId: { kind: 'm:1', entity: 'Account', mapToPk: true, fieldName: 'owner_id', index: true },
    name: { type: 'string', length: 4096 },
    version: { type: 'string', length: 64, default: '1.0' },
    description: { type: 'text', default: '' },
    enabled: { type: 'boolean', default: true },
    disabledMessage: { type: 'text', default: '' },
    keysPaused: { type: 'boolean', default: false },
    hwidLock: { type: 'boolean', default: false },
    requireSignature: { type: 'boolean', default: false },
    injectionDetection: { type: 'boolean', default: true },
    requireHeartbeat: { type: 'boolean', default: false },
    forceUpdate: { type: 'boolean', default: false },
    updateUrl: { type: 'text', default: '' },
    updateMessage: { type: 'text', default: '' },
    forceEncryption: { type: 'boolean', default: false },
    hashCheck: { type: 'boolean', default: false },
    expectedBinaryHash: { type: 'string', length: 128, default: '' },
    webhook: { type: 'text', default: '' },
    keyCosts: { type: 'json', default: '{}' },
    allowedHashes: { type: 'json', default: '[]' },
    heartbeatInterval: { type: 'integer', default: 30 },
    maxSessions: { type: 'integer', default: 0 },
    sessionOverflow: { type: 'string', length: 16, default: 'reject' },
    maxDevices: { type: 'integer', default: 1 },
    trialHours: { type: 'integer', default: 0 },
    trialLevel: { type: 'integer', default: 1 },
    offlineDays: { type: 'integer', default: 0 },
    graceHours: { type: 'integer', default: 0 },
    expiredUpdates: { type: 'string', length: 16, default: 'none' },
    portalEnabled: { type: 'boolean', default: false },
    portalResetCooldownHours: { type: 'integer', default: 24 },
    apiKey: { type: 'string', length: 64, unique: true },
    apiSecret: { type: 'string', length: 128 },
    createdBy: { type: 'uuid', nullable: true },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
  },
});
