// The one catalogue of coded errors: the only place a status and a `detail` text are spelled.
// Client SDKs in the field match these strings to the letter (docs/spec.md "Errors", docs/protocol.md 1-7, 11).
// Routes throw `new AppError('code')`; each transport maps it to a body in one place.

export const ERRORS = {
  // general (docs/protocol.md 1)
  payload_too_large: { status: 413, detail: 'Payload too large' },
  malformed_json: { status: 400, detail: 'Malformed JSON body' },
  rate_limited: { status: 429, detail: 'Rate limit exceeded' },
  route_not_found: { status: 404, detail: 'Not found' },
  method_not_allowed: { status: 405, detail: 'Method not allowed' },
  internal: { status: 500, detail: 'Internal server error' },
  unavailable: { status: 503, detail: 'Service unavailable' },

  // client gate and sessions (docs/protocol.md 2, 3)
  app_not_found: { status: 404, detail: 'Application not found' },
  session_invalid: { status: 401, detail: 'Invalid or expired session' },
  signature_invalid: { status: 401, detail: 'Invalid request signature' },
  access_denied: { status: 403, detail: 'Access denied' },
  app_disabled: { status: 403, detail: 'Application disabled' },
  locked_out: { status: 429, detail: 'Too many failed attempts, try again later.' },

  // init
  update_required: { status: 426, detail: 'A new version is required.' },
  encryption_key_required: { status: 400, detail: 'Encryption key required' },
  binary_hash_mismatch: { status: 403, detail: 'Binary hash mismatch' },
  binary_token_invalid: { status: 403, detail: 'Invalid binary token' },

  // register / login / license
  license_invalid: { status: 400, detail: 'Invalid license key' },
  license_used: { status: 400, detail: 'License key already used' },
  username_taken: { status: 400, detail: 'Username already taken' },
  license_banned: { status: 403, detail: 'License key is banned' },
  license_paused: { status: 403, detail: 'License validation is temporarily paused for this application.' },
  login_paused: { status: 403, detail: 'Access is temporarily paused for this application.' },
  heartbeat_required: { status: 403, detail: 'Heartbeat session required. Call /heartbeat/start first.' },
  license_state_changed: { status: 409, detail: 'License state changed mid-activation, please retry' },
  license_in_progress: { status: 409, detail: 'License activation in progress, retry.' },
  invalid_credentials: { status: 401, detail: 'Invalid username or password' },
  license_not_valid: { status: 403, detail: 'License not valid' },
  hwid_mismatch: { status: 403, detail: 'HWID mismatch. Key locked to another device.' },
  license_expired: { status: 403, detail: 'License expired' },

  // licensing models (docs/protocol.md 12): trials and offline license files
  trial_disabled: { status: 403, detail: 'Trials are not enabled for this application.' },
  trial_used: { status: 403, detail: 'Trial already used on this device.' },
  offline_disabled: { status: 403, detail: 'Offline licenses are not enabled for this application.' },

  // heartbeat
  session_not_activated: { status: 403, detail: 'Session not activated. Call /login, /register or /license first.' },
  heartbeat_exists: { status: 409, detail: 'heartbeat session already exists for this nonce' },
  heartbeat_rejected: { status: 403, detail: 'rejected' },
  heartbeat_token_invalid: { status: 401, detail: 'Invalid heartbeat token' },
  // docs/protocol.md 12.2: heartbeat/start over the key's max_sessions with session_overflow `reject`.
  session_limit: { status: 409, detail: 'Concurrent session limit reached' },

  // dashboard
  not_authenticated: { status: 401, detail: 'Not authenticated' },
  permission_denied: { status: 403, detail: 'Permission denied' },
  owner_protected: { status: 403, detail: 'The owner account cannot be modified.' },
  self_edit: {
    status: 403,
    detail: 'Cannot manage your own account here. Change your own password from Settings instead.',
  },
  email_reserved: { status: 403, detail: 'Email address is reserved' },
  resellers_no_apps: { status: 403, detail: "Resellers don't own apps" },
  credits_resellers_only: { status: 400, detail: 'Credits only apply to resellers.' },
  insufficient_credits: { status: 403, detail: 'Insufficient credits' },
  current_password_wrong: { status: 400, detail: 'Current password is incorrect' },
  account_username_taken: { status: 409, detail: 'Username already taken' },
  email_taken: { status: 409, detail: 'Email already in use' },
  license_not_found: { status: 404, detail: 'License not found' },
  user_not_found: { status: 404, detail: 'User not found' },
  device_not_found: { status: 404, detail: 'Device not found' },
  ban_not_found: { status: 404, detail: 'Blacklist entry not found' },
  account_not_found: { status: 404, detail: 'Account not found' },
  delivery_not_found: { status: 404, detail: 'Delivery not found' },
  job_not_found: { status: 404, detail: 'Job not found' },
  subscription_admins_only: { status: 400, detail: 'Subscriptions only apply to admins.' },
  subscription_expired: { status: 403, detail: 'Subscription expired' },
  license_lifetime: { status: 400, detail: 'Lifetime keys cannot be extended' },
  license_not_activated: { status: 400, detail: 'Key has not been activated yet' },
  // operators (docs/protocol.md 13): API tokens and two-factor sign-in
  token_invalid: { status: 401, detail: 'Invalid or expired token' },
  token_scope: { status: 403, detail: 'Token scope does not allow this action' },
  token_not_found: { status: 404, detail: 'Token not found' },
  two_factor_code_required: { status: 401, detail: 'Two-factor code required' },
  two_factor_login_invalid: { status: 401, detail: 'Invalid two-factor code' },
  two_factor_code_invalid: { status: 400, detail: 'Invalid two-factor code' },
  two_factor_required: { status: 403, detail: 'Two-factor authentication required. Set it up from Account.' },
  two_factor_already_on: { status: 409, detail: 'Two-factor sign-in is already enabled' },
  two_factor_not_set_up: { status: 400, detail: 'Set up two-factor sign-in first' },
  two_factor_off: { status: 400, detail: 'Two-factor sign-in is not enabled' },
  session_not_found: { status: 404, detail: 'Session not found' },
  // customer portal and order fulfilment (docs/protocol.md 14)
  product_not_found: { status: 404, detail: 'Product not found' },
  order_not_found: { status: 404, detail: 'Order not found' },
  fulfil_signature_invalid: { status: 400, detail: 'Invalid signature' },
  portal_disabled: { status: 403, detail: 'Customer portal is not enabled for this application.' },
  portal_credentials_invalid: { status: 401, detail: 'Invalid credentials' },
  portal_reset_cooldown: { status: 429, detail: 'Device reset is on cooldown.' },
  portal_users_only: { status: 403, detail: 'Only customers who sign in with a name and password have one.' },
  // releases and updates (docs/releases.md)
  release_not_found: { status: 404, detail: 'Release not found' },
  artifact_not_found: { status: 404, detail: 'Artifact not found' },
  version_exists: { status: 409, detail: 'Version already exists' },
  release_published: { status: 409, detail: 'Release already published' },
  download_link_expired: { status: 403, detail: 'Download link expired' },
  range_not_satisfiable: { status: 416, detail: 'Range not satisfiable' },
  // air-gapped machines: the relay's seat leases (docs/air-gapped.md)
  relay_no_seats: { status: 409, detail: 'No seats available' },
  relay_lease_not_found: { status: 404, detail: 'Lease not found' },
  // CSRF defence of the web dashboard: a cookie-authenticated write must come from the dashboard's own origin.
  cross_site: { status: 403, detail: 'Cross-site request refused' },
} as const satisfies Record<string, { status: number; detail: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** One entry of a 422 body (docs/protocol.md 1). */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export type Detail = string | Record<string, unknown> | ValidationIssue[];

/**
 * A coded failure. `detail` overrides the catalogue text only where docs/spec.md makes it data-driven
 * (an app's disabled_message, the 426 object); `headers` carries e.g. Retry-After.
 */
export class AppError extends Error {
  readonly status: number;
  readonly detail: Detail;
  constructor(
    readonly code: ErrorCode,
    detail?: Detail,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(code);
    this.status = ERRORS[code].status;
    this.detail = detail ?? ERRORS[code].detail;
  }
}

/** 422 with docs/protocol.md 1's shape. */
export class ValidationError extends Error {
  readonly status = 422;
  constructor(readonly issues: ValidationIssue[]) {
    super('validation');
  }
}

export function validationError(
  field: string | (string | number)[],
  msg: string,
  type = 'value_error',
): ValidationError {
  const loc = Array.isArray(field) ? ['body', ...field] : ['body', field];
  return new ValidationError([{ loc, msg, type }]);
}

export function rateLimited(retryAfterSeconds: number): AppError {
  return new AppError('rate_limited', undefined, { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) });
}

export function lockedOut(retryAfterSeconds: number): AppError {
  return new AppError('locked_out', undefined, { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) });
}

// ---- failures of the infrastructure below (PostgreSQL, Redis) --------------------------------
// Recognised in one place, so that an outage answers 503 with Retry-After (and queued work waits
// for the database instead of being dropped) and a lost unique-name race answers the catalogue's
// conflict: never a 500 for something that is not a bug.

/** Seconds a client is told to wait when a dependency is unreachable. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/** Unique constraints whose violation is a caller's conflict, not a bug (docs/protocol.md 11.22). */
const UNIQUE_CONFLICTS: Readonly<Record<string, ErrorCode>> = {
  accounts_username_unique: 'account_username_taken',
  accounts_email_unique: 'email_taken',
  end_users_app_id_username_unique: 'username_taken',
  releases_app_id_version_unique: 'version_exists',
};

// PostgreSQL SQLSTATE classes 08 (connection exception) and 57P (operator intervention: shutdown,
// crash, starting up); socket errors from the driver; pool and client errors of knex/pg; ioredis.
const PG_UNAVAILABLE = /^(08|57P)/;
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTCONN',
  'ECONNABORTED',
]);
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Timeout acquiring a connection',
  'Client has encountered a connection error',
  'connect ECONNREFUSED',
  'the database system is',
  'Connection is closed',
  "Stream isn't writeable",
  'Reached the max retries per request limit',
  'Command timed out',
  'Knex: Timeout',
  '.s.PGSQL.',
  'Connection ended unexpectedly',
  'terminating connection',
];

function fields(err: unknown): {
  code?: unknown;
  constraint?: unknown;
  message: string;
  name?: unknown;
  cause?: unknown;
} {
  if (typeof err !== 'object' || err === null) return { message: String(err) };
  const e = err as Record<string, unknown>;
  return {
    code: e.code,
    constraint: e.constraint,
    message: typeof e.message === 'string' ? e.message : '',
    name: e.name,
    cause: e.cause,
  };
}

/** A driver or store failure as the coded error it stands for; undefined for a genuine bug. */
export function infrastructureError(err: unknown, depth = 0): AppError | undefined {
  if (depth > 3) return undefined;
  const f = fields(err);
  if (f.code === '23505' && typeof f.constraint === 'string') {
    const code = UNIQUE_CONFLICTS[f.constraint];
    if (code) return new AppError(code);
  }
  const unavailable =
    (typeof f.code === 'string' && (PG_UNAVAILABLE.test(f.code) || SOCKET_CODES.has(f.code))) ||
    f.name === 'MaxRetriesPerRequestError' ||
    f.name === 'ConnectionException' ||
    UNAVAILABLE_MESSAGES.some((m) => f.message.includes(m));
  if (unavailable) return new AppError('unavailable', undefined, { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_S) });
  return f.cause !== undefined ? infrastructureError(f.cause, depth + 1) : undefined;
}
