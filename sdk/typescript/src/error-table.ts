// This SDK's copy of the error table (sdk/vectors/errors.json, generated from the server's
// src/errors.ts). test/vectors.test.ts fails when the two differ: update both together.
import type { ErrorCode } from './errors.js';

/** [status, detail, code]: an answer with exactly this status and detail string maps to code. */
export const ERROR_ENTRIES: readonly (readonly [number, string, ErrorCode])[] = [
  [413, 'Payload too large', 'server'],
  [400, 'Malformed JSON body', 'server'],
  [429, 'Rate limit exceeded', 'rate_limited'],
  [404, 'Not found', 'server'],
  [405, 'Method not allowed', 'server'],
  [500, 'Internal server error', 'server'],
  [503, 'Service unavailable', 'server'],
  [404, 'Application not found', 'app_disabled'],
  [401, 'Invalid or expired session', 'session_expired'],
  [401, 'Invalid request signature', 'clock_skew'],
  [403, 'Access denied', 'banned'],
  [403, 'Application disabled', 'app_disabled'],
  [429, 'Too many failed attempts, try again later.', 'locked_out'],
  [426, 'A new version is required.', 'update_required'],
  [400, 'Encryption key required', 'server'],
  [403, 'Binary hash mismatch', 'server'],
  [403, 'Invalid binary token', 'server'],
  [400, 'Invalid license key', 'invalid_key'],
  [400, 'License key already used', 'key_used'],
  [400, 'Username already taken', 'server'],
  [403, 'License key is banned', 'banned'],
  [403, 'License validation is temporarily paused for this application.', 'app_disabled'],
  [403, 'Access is temporarily paused for this application.', 'app_disabled'],
  [403, 'Heartbeat session required. Call /heartbeat/start first.', 'server'],
  [409, 'License state changed mid-activation, please retry', 'server'],
  [409, 'License activation in progress, retry.', 'server'],
  [401, 'Invalid username or password', 'invalid_key'],
  [403, 'License not valid', 'invalid_key'],
  [403, 'HWID mismatch. Key locked to another device.', 'hwid_mismatch'],
  [403, 'License expired', 'expired'],
  [403, 'Session not activated. Call /login, /register or /license first.', 'session_expired'],
  [409, 'heartbeat session already exists for this nonce', 'server'],
  [403, 'rejected', 'heartbeat_killed'],
  [401, 'Invalid heartbeat token', 'heartbeat_killed'],
  // docs/protocol.md 12 (licensing models).
  [403, 'Trials are not enabled for this application.', 'trial_disabled'],
  [403, 'Trial already used on this device.', 'trial_used'],
  [403, 'Offline licenses are not enabled for this application.', 'offline_disabled'],
  [409, 'Concurrent session limit reached', 'session_limit'],
  // A download link (update downloads report these as UpdateError download_failed).
  [403, 'Download link expired', 'server'],
  [416, 'Range not satisfiable', 'server'],
];

/** Used when no entry matches: data-driven details (disabled_message, the 426 object, other 429s). */
export const STATUS_FALLBACKS: Readonly<Record<number, ErrorCode>> = {
  403: 'app_disabled',
  426: 'update_required',
  429: 'rate_limited',
};

/** Everything else. */
export const FALLBACK_CODE: ErrorCode = 'server';
