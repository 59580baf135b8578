// One error type for every failure: the host program gets a KeywardenError with a code, never a
// process exit and never an untyped throw. Server answers are mapped by the table in
// error-table.ts (checked against sdk/vectors/errors.json); the SDK raises network, timeout,
// verification, clock_skew and offline_invalid itself.
import { ERROR_ENTRIES, FALLBACK_CODE, STATUS_FALLBACKS } from './error-table.js';

export const ERROR_CODES = [
  'invalid_key',
  'key_used',
  'banned',
  'expired',
  'hwid_mismatch',
  'app_disabled',
  'update_required',
  'rate_limited',
  'locked_out',
  'session_expired',
  'heartbeat_killed',
  'verification',
  'clock_skew',
  'network',
  'timeout',
  'server',
  // docs/protocol.md 12 (licensing models); offline_invalid: an offline license file this SDK refuses (see `reason`).
  'trial_disabled',
  'trial_used',
  'offline_disabled',
  'offline_invalid',
  'session_limit',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Why a response was not believed (same strings in every Keywarden SDK). */
export type VerificationReason =
  | 'unsigned'
  | 'unknown_kid'
  | 'bad_base64'
  | 'stale'
  | 'bad_signature'
  | 'bad_proof'
  | 'malformed'
  /** Realtime channel: a frame whose MAC does not verify (forged, or recorded on another connection). */
  | 'bad_mac'
  /** Realtime channel: a frame whose seq is not the next one (replayed, dropped or reordered). */
  | 'out_of_order';

/**
 * Why an offline license file was refused (same strings in every SDK; sdk/vectors/offline.json),
 * checked in this order: malformed, unknown_kid, bad_signature, wrong_app, wrong_hwid,
 * clock_rolled_back, issued_in_future, expired.
 */
export type OfflineReason =
  | 'malformed'
  | 'unknown_kid'
  | 'bad_signature'
  | 'wrong_app'
  | 'wrong_hwid'
  | 'clock_rolled_back'
  | 'issued_in_future'
  | 'expired'
  /** An activation answer without the nonce of this machine's latest request (airgap.json). */
  | 'wrong_request';

/**
 * Why an update (an offered artifact or its download) was refused (same strings in every SDK;
 * sdk/vectors/artifacts.json): unknown_kid, bad_signature, size_mismatch, sha512_mismatch, and
 * download_failed (the link refused, the connection failed, or the file could not be written).
 */
export type UpdateReason = 'unknown_kid' | 'bad_signature' | 'size_mismatch' | 'sha512_mismatch' | 'download_failed';

export interface KeywardenErrorInit {
  status?: number;
  detail?: unknown;
  reason?: VerificationReason | OfflineReason | UpdateReason;
  retryAfter?: number;
  latestVersion?: string;
  updateUrl?: string;
  /** True when the request certainly never reached the server (safe to send again). */
  notSent?: boolean;
  cause?: unknown;
}

export class KeywardenError extends Error {
  readonly code: ErrorCode;
  /** HTTP status of a server answer. */
  readonly status: number | undefined;
  /** The answer's `detail`, exactly as sent (string, 426 object or 422 array). */
  readonly detail: unknown;
  /**
   * For code `verification` a VerificationReason, for `offline_invalid` an OfflineReason; on an
   * UpdateError an UpdateReason.
   */
  readonly reason: VerificationReason | OfflineReason | UpdateReason | undefined;
  /** Seconds, for `rate_limited` and `locked_out` (from Retry-After). */
  readonly retryAfter: number | undefined;
  /** For `update_required`. */
  readonly latestVersion: string | undefined;
  readonly updateUrl: string | undefined;
  readonly notSent: boolean;

  constructor(code: ErrorCode, message: string, init: KeywardenErrorInit = {}) {
    super(message, init.cause !== undefined ? { cause: init.cause } : undefined);
    this.name = 'KeywardenError';
    this.code = code;
    this.status = init.status;
    this.detail = init.detail;
    this.reason = init.reason;
    this.retryAfter = init.retryAfter;
    this.latestVersion = init.latestVersion;
    this.updateUrl = init.updateUrl;
    this.notSent = init.notSent ?? false;
  }
}

export function verificationError(reason: VerificationReason, message: string): KeywardenError {
  return new KeywardenError('verification', `response refused (${reason}): ${message}`, { reason });
}

export function offlineError(reason: OfflineReason, message: string): KeywardenError {
  return new KeywardenError('offline_invalid', `offline license refused (${reason}): ${message}`, { reason });
}

/** The code for a failure answer: exact (status, detail) entry, else status fallback, else `server`. */
export function codeFor(status: number, detail: unknown): ErrorCode {
  if (typeof detail === 'string') {
    for (const [s, d, code] of ERROR_ENTRIES) if (s === status && d === detail) return code;
  }
  return STATUS_FALLBACKS[status] ?? FALLBACK_CODE;
}

/** Builds the error for a verified non-200 answer. */
export function errorFromAnswer(status: number, detail: unknown, retryAfterHeader: string | undefined): KeywardenError {
  const code = codeFor(status, detail);
  const init: KeywardenErrorInit = { status, detail };
  const retry = retryAfterHeader !== undefined ? Number(retryAfterHeader) : NaN;
  if (Number.isFinite(retry) && retry >= 0) init.retryAfter = retry;
  let text = typeof detail === 'string' ? detail : JSON.stringify(detail);
  if (code === 'update_required' && detail !== null && typeof detail === 'object') {
    const d = detail as Record<string, unknown>;
    if (typeof d.latest_version === 'string') init.latestVersion = d.latest_version;
    if (typeof d.update_url === 'string') init.updateUrl = d.update_url;
    if (typeof d.message === 'string') text = d.message;
  }
  return new KeywardenError(code, `${code}: ${status} ${text}`, init);
}
