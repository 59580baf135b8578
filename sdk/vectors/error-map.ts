// The ONE mapping from the server's error catalogue (src/errors.ts) to the SDK error codes.
// scripts/gen-vectors.ts turns it into sdk/vectors/errors.json; every SDK embeds its own copy of
// that table and checks it against errors.json in its unit tests. Typed as a Record over every
// catalogue code, so a new entry in src/errors.ts does not compile until someone decides here
// whether clients can see it (null: dashboard-only, never answered on /api/client/*).
import type { ErrorCode } from '../../src/errors.js';

export const SDK_CODES = [
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
  // docs/protocol.md 12 (licensing models). offline_invalid is raised by the SDK itself: an offline license
  // file it refuses (with a reason of its own, see sdk/vectors/README.md "offline.json").
  'trial_disabled',
  'trial_used',
  'offline_disabled',
  'offline_invalid',
  'session_limit',
] as const;
export type SdkCode = (typeof SDK_CODES)[number];

/** Every answer that matches no entry and no status fallback. Status and detail stay on the error. */
export const FALLBACK_CODE: SdkCode = 'server';

/**
 * Used when (status, detail) matches no entry: the only data-driven details are an app's
 * disabled_message (403), the 426 object and Retry-After-bearing 429s.
 */
export const STATUS_FALLBACKS: Readonly<Record<number, SdkCode>> = {
  403: 'app_disabled',
  426: 'update_required',
  429: 'rate_limited',
};

/**
 * Client answers that docs/protocol.md 12 spells word for word but src/errors.ts does not carry yet (the
 * server side of the licensing models comes after the SDKs). scripts/gen-vectors.ts appends them
 * to errors.json so every SDK maps them today. Once src/errors.ts has an entry of the same name,
 * gen-vectors refuses to run until that entry is moved into ERROR_MAP (the Record type asks for it
 * anyway) and deleted here. Each detail is copied from docs/protocol.md section 12, character for character.
 */
export const PROTOCOL_ENTRIES: Readonly<Record<string, { status: number; detail: string; sdk_code: SdkCode }>> = {};

export const ERROR_MAP: Readonly<Record<ErrorCode, SdkCode | null>> = {
  payload_too_large: 'server',
  malformed_json: 'server',
  rate_limited: 'rate_limited',
  route_not_found: 'server',
  method_not_allowed: 'server',
  internal: 'server',
  unavailable: 'server',

  // An unknown api_key means the vendor deleted or never had the app: to the end user it is unusable.
  app_not_found: 'app_disabled',
  session_invalid: 'session_expired',
  // The request signature was refused: the clock is more than 300 s off (SDKs learn the server's
  // offset from this signed answer and retry once) or the api_secret was rotated.
  signature_invalid: 'clock_skew',
  // Blacklisted IP or HWID.
  access_denied: 'banned',
  app_disabled: 'app_disabled',
  locked_out: 'locked_out',

  update_required: 'update_required',
  encryption_key_required: 'server',
  binary_hash_mismatch: 'server',
  binary_token_invalid: 'server',

  license_invalid: 'invalid_key',
  license_used: 'key_used',
  username_taken: 'server',
  license_banned: 'banned',
  license_paused: 'app_disabled',
  login_paused: 'app_disabled',
  heartbeat_required: 'server',
  license_state_changed: 'server',
  license_in_progress: 'server',
  // Login: wrong name or password, banned, expired or HWID mismatch all answer this one text.
  invalid_credentials: 'invalid_key',
  license_not_valid: 'invalid_key',
  hwid_mismatch: 'hwid_mismatch',
  license_expired: 'expired',

  // The session was never authenticated: authenticate again, as after an expired session.
  session_not_activated: 'session_expired',
  heartbeat_exists: 'server',
  heartbeat_rejected: 'heartbeat_killed',
  heartbeat_token_invalid: 'heartbeat_killed',
  // docs/protocol.md 12 (licensing models)
  trial_disabled: 'trial_disabled',
  trial_used: 'trial_used',
  offline_disabled: 'offline_disabled',
  // heartbeat/start over the key's max_sessions with session_overflow `reject`.
  session_limit: 'session_limit',

  not_authenticated: null,
  permission_denied: null,
  owner_protected: null,
  self_edit: null,
  email_reserved: null,
  resellers_no_apps: null,
  credits_resellers_only: null,
  insufficient_credits: null,
  current_password_wrong: null,
  account_username_taken: null,
  email_taken: null,
  license_not_found: null,
  device_not_found: null,
  user_not_found: null,
  ban_not_found: null,
  account_not_found: null,
  delivery_not_found: null,
  job_not_found: null,
  subscription_admins_only: null,
  subscription_expired: null,
  license_lifetime: null,
  license_not_activated: null,
  // Operators (docs/protocol.md 13): API tokens and two-factor sign-in belong to the dashboard.
  token_invalid: null,
  token_scope: null,
  token_not_found: null,
  two_factor_code_required: null,
  two_factor_login_invalid: null,
  two_factor_code_invalid: null,
  two_factor_required: null,
  two_factor_already_on: null,
  two_factor_not_set_up: null,
  two_factor_off: null,
  session_not_found: null,
  // customer portal and fulfilment (docs/protocol.md 14): never answered on /api/client/*
  product_not_found: null,
  order_not_found: null,
  fulfil_signature_invalid: null,
  portal_disabled: null,
  portal_credentials_invalid: null,
  portal_reset_cooldown: null,
  portal_users_only: null,
  cross_site: null,
  release_not_found: null,
  artifact_not_found: null,
  version_exists: null,
  release_published: null,
  // Answered on /api/dl/ (no /api/client/ signature): an SDK's download_update sees these.
  download_link_expired: 'server',
  range_not_satisfiable: 'server',
  // The relay's lease answers (docs/air-gapped.md): not /api/client/* answers; SDKs read the relay's statuses.
  relay_no_seats: null,
  relay_lease_not_found: null,
};
