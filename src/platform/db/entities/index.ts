export * from './account.entity.js';
export * from './dashboard-session.entity.js';
export * from './application.entity.js';
export * from './license-key.entity.js';
export * from './end-user.entity.js';
export * from './blacklist-entry.entity.js';
export * from './audit-entry.entity.js';
export * from './request-nonce.entity.js';
export * from './process-state.entity.js';
export * from './screenshot.entity.js';
export * from './api-token.entity.js';
export * from './recovery-code.entity.js';
export * from './device.entity.js';
export * from './entitlement.entity.js';
export * from './trial.entity.js';
export * from './commerce.entity.js';
export * from './deployment-key.entity.js';
export * from './beat-count.entity.js';
import { AccountSchema } from './account.entity.js';
import { DashboardSessionSchema } from './dashboard-session.entity.js';
import { ApplicationSchema } from './application.entity.js';
import { LicenseKeySchema } from './license-key.entity.js';
import { EndUserSchema } from './end-user.entity.js';
import { BlacklistEntrySchema } from './blacklist-entry.entity.js';
import { AuditEntrySchema } from './audit-entry.entity.js';
import { RequestNonceSchema } from './request-nonce.entity.js';
import { ProcessStateSchema } from './process-state.entity.js';
import { ScreenshotSchema } from './screenshot.entity.js';
import { ApiTokenSchema } from './api-token.entity.js';
import { RecoveryCodeSchema } from './recovery-code.entity.js';
import { KeyDeviceSchema, UserDeviceSchema } from './device.entity.js';
import { EntitlementSchema } from './entitlement.entity.js';
import { TrialSchema } from './trial.entity.js';
import { OrderSchema, PortalResetSchema, PortalSessionSchema, ProductSchema } from './commerce.entity.js';
import { DeploymentKeySchema } from './deployment-key.entity.js';
import { BeatCountSchema } from './beat-count.entity.js';
import { DeletedAccountSchema } from './deleted-account.entity.js';
import { WebhookDeliverySchema } from './webhook-delivery.entity.js';
import { JobSchema } from './job.entity.js';
import { ReleaseArtifactSchema, ReleaseDownloadMarkSchema, ReleaseSchema } from './release.entity.js';

export const ENTITIES = [
  AccountSchema,
  DashboardSessionSchema,
  ApplicationSchema,
  LicenseKeySchema,
  EndUserSchema,
  BlacklistEntrySchema,
  AuditEntrySchema,
  RequestNonceSchema,
  ProcessStateSchema,
  ScreenshotSchema,
  ApiTokenSchema,
  RecoveryCodeSchema,
  KeyDeviceSchema,
  UserDeviceSchema,
  EntitlementSchema,
  TrialSchema,
  ProductSchema,
  OrderSchema,
  PortalSessionSchema,
  PortalResetSchema,
  DeploymentKeySchema,
  BeatCountSchema,
  DeletedAccountSchema,
  WebhookDeliverySchema,
  JobSchema,
  ReleaseSchema,
  ReleaseArtifactSchema,
  ReleaseDownloadMarkSchema,
];
export type { WebhookDelivery } from './webhook-delivery.entity.js';
