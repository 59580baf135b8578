// Keywarden client SDK for Node.js (ESM and CommonJS). Runtime dependencies: none (node:crypto,
// node:http/https). Start with Client.fromConfig('keywarden.json').
export { Client } from './client.js';
export type {
  ClientOptions,
  AppInfo,
  UserInfo,
  LicenseInfo,
  TrialInfo,
  InitOptions,
  Logger,
  Activation,
} from './client.js';
export { Heartbeat } from './heartbeat.js';
export type {
  HeartbeatOptions,
  HeartbeatState,
  BeatEvent,
  DegradedEvent,
  CompromisedEvent,
  RevokedEvent,
  ExpiredEvent,
  UpdateRequiredEvent,
  NoticeEvent,
  OfflineEvent,
  GraceExpiredEvent,
} from './heartbeat.js';
export { ChannelConnection, ChannelLink, CHANNEL_PATH, verifyChannelHello, readChannelFrame } from './channel.js';
export type { ChannelContext, ChannelPush, ChannelClose, OpenResult, LinkEvent } from './channel.js';
export { KeywardenError, ERROR_CODES, codeFor, errorFromAnswer } from './errors.js';
export type { ErrorCode, VerificationReason, OfflineReason, UpdateReason } from './errors.js';
export { UpdateError, artifactMessage } from './updates.js';
export type { Artifact, UpdateOffer, ProgressCallback } from './updates.js';
export { verifyLicenseFile, defaultStateFile, MAX_FUTURE_SECONDS, MAX_ROLLBACK_SECONDS } from './offline.js';
export type { OfflineLicense } from './offline.js';
export { SeatLease, buildRequest, verifyPool, NO_SEATS } from './airgap.js';
export type { SeatPool } from './airgap.js';
export { graceUntilOf } from './grace.js';
export { parseUtcMs } from './utc.js';
export { ERROR_ENTRIES, STATUS_FALLBACKS, FALLBACK_CODE } from './error-table.js';
export { parseConfig, loadConfigFile } from './config.js';
export type { KeywardenConfig, ResponseKey } from './config.js';
export { defaultTransport, TransportError } from './transport.js';
export type { Transport, TransportRequest, TransportResponse, DefaultTransportOptions } from './transport.js';
export { machineHwid, selfHash, rawMachineId, debuggerAttached } from './machine.js';
export {
  canonicalRequest,
  requestSignature,
  responseMessage,
  startProof,
  beatProof,
  decryptResponse,
  channelTranscript,
  channelKeys,
  sealFrame,
  openFrame,
} from './crypto.js';
export { verifyResponse, pinKeys } from './verify.js';
export type { SignedAnswer, PinnedKeys } from './verify.js';
