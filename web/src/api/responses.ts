// The shapes of the API's answers that the dashboard reads. /api/openapi.json types requests but
// not responses, so they are declared here once, as TypeBox schemas: the page imports only the
// types (no TypeBox code reaches the bundle) and test/web/api-contract.test.ts checks real server
// answers against the schemas, so a field renamed on the server fails a test instead of the page.
// Fields a caller may not see (docs/spec.md "Reseller scoping and hiding") are optional: hidden means absent.
import { Type, type Static, type TSchema } from '@sinclair/typebox';

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Iso = Type.String({ format: 'date-time' });
const Geo = Nullable(Type.Object({}, { additionalProperties: true }));
const Role = Type.Union([
  Type.Literal('owner'),
  Type.Literal('admin'),
  Type.Literal('reseller'),
  Type.Literal('developer'),
]);
const PermissionMap = Type.Record(Type.String(), Type.Boolean());
const KeyCostsMap = Type.Record(Type.String(), Nullable(Type.Number()));

export const AccountSchema = Type.Object({
  id: Type.String(),
  username: Type.String(),
  display_name: Nullable(Type.String()),
  email: Nullable(Type.String()),
  role: Role,
  parent_id: Nullable(Type.String()),
  owner_id: Nullable(Type.String()),
  enabled: Type.Boolean(),
  allowed_apps: Type.Array(Type.String()),
  key_quota: Nullable(Type.Number()),
  credits: Nullable(Type.Number()),
  notes: Nullable(Type.String()),
  permissions: Nullable(PermissionMap),
  subscription_expires_at: Nullable(Iso),
  webhook: Nullable(Type.String()),
  /** Two-factor sign-in is on (docs/protocol.md 13.2). */
  two_factor: Type.Boolean(),
  created_at: Iso,
});
export type Account = Static<typeof AccountSchema>;

export const MeSchema = Type.Object({
  account: Type.Intersect([
    AccountSchema,
    Type.Object({
      webhook_secret: Type.Optional(Type.String()),
      /** The owner requires a second factor this account has not set up: only Account > Security works. */
      two_factor_required: Type.Boolean(),
      /** An owner's policy for its tree. */
      require_two_factor: Type.Optional(Type.Boolean()),
    }),
  ]),
});
export type Me = Static<typeof MeSchema>;

export const LoginSchema = Type.Object({ token: Type.String(), account: AccountSchema });

export const AppSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  version: Type.String(),
  description: Nullable(Type.String()),
  enabled: Type.Boolean(),
  disabled_message: Nullable(Type.String()),
  keys_paused: Type.Boolean(),
  hwid_lock: Type.Boolean(),
  require_signature: Type.Boolean(),
  injection_detection: Type.Boolean(),
  require_heartbeat: Type.Boolean(),
  force_update: Type.Boolean(),
  update_url: Nullable(Type.String()),
  update_message: Nullable(Type.String()),
  force_encryption: Type.Boolean(),
  hash_check: Type.Boolean(),
  expected_binary_hash: Nullable(Type.String()),
  webhook: Nullable(Type.String()),
  key_costs: KeyCostsMap,
  allowed_hashes: Type.Array(Type.String()),
  heartbeat_interval: Nullable(Type.Integer()),
  beat_interval: Type.Integer(),
  max_sessions: Type.Optional(Type.Integer()),
  session_overflow: Type.Optional(Type.Union([Type.Literal('reject'), Type.Literal('kick_oldest')])),
  // docs/releases.md "Expired licenses".
  expired_updates: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('maintain')])),
  portal_enabled: Type.Boolean(),
  portal_reset_cooldown_hours: Type.Integer(),
  // Licensing models (docs/protocol.md 12).
  max_devices: Type.Integer(),
  trial_hours: Type.Integer(),
  trial_level: Type.Integer(),
  offline_days: Type.Integer(),
  grace_hours: Type.Integer(),
  api_key: Type.String(),
  api_secret: Type.Optional(Type.String()),
  owner_id: Type.String(),
  created_at: Iso,
  updated_at: Iso,
  stats: Type.Optional(Type.Object({ keys: Type.Number(), users: Type.Number() })),
});
export type App = Static<typeof AppSchema>;

export const CredentialsSchema = Type.Object({
  api_key: Type.String(),
  api_secret: Type.Optional(Type.String()),
  owner_id: Type.String(),
});
export type Credentials = Static<typeof CredentialsSchema>;

/** A machine of a key or an end user (docs/protocol.md 12.1); hidden with hwid. */
const DeviceSchema = Type.Object({ hwid: Type.String(), first_seen: Iso, last_seen: Iso });
export type Device = Static<typeof DeviceSchema>;

export const EntitlementsSchema = Type.Object({
  entitlements: Type.Array(Type.Object({ code: Type.String(), name: Type.String() })),
});
export type Entitlements = Static<typeof EntitlementsSchema>;

const LicenseStatus = Type.Union([
  Type.Literal('unused'),
  Type.Literal('pending'),
  Type.Literal('used'),
  Type.Literal('banned'),
]);
const ComputedStatus = Type.Union([
  Type.Literal('active'),
  Type.Literal('banned'),
  Type.Literal('unactivated'),
  Type.Literal('expired'),
]);

export const LicenseSchema = Type.Object({
  id: Type.String(),
  key: Type.Optional(Type.String()),
  key_preview: Type.String(),
  app_id: Type.String(),
  status: LicenseStatus,
  computed_status: ComputedStatus,
  used_by: Nullable(Type.String()),
  hwid: Type.Optional(Nullable(Type.String())),
  ip: Type.Optional(Nullable(Type.String())),
  level: Type.Integer(),
  duration_value: Nullable(Type.Integer()),
  duration_unit: Type.String(),
  duration_days: Type.Integer(),
  created_at: Nullable(Iso),
  last_login: Nullable(Iso),
  expires_at: Nullable(Iso),
  note: Nullable(Type.String()),
  reseller_id: Nullable(Type.String()),
  created_by: Nullable(Type.String()),
  activation_geo: Type.Optional(Geo),
  last_geo: Type.Optional(Geo),
  known_countries: Type.Optional(Type.Array(Type.String())),
  screenshot_path: Type.Optional(Type.String()),
  max_sessions: Type.Optional(Nullable(Type.Integer())),
  live_sessions: Type.Optional(Type.Integer()),
  max_devices: Nullable(Type.Integer()),
  entitlements: Type.Array(Type.String()),
  devices: Type.Optional(Type.Array(DeviceSchema)),
});
export type License = Static<typeof LicenseSchema>;

export const OfflineFileSchema = Type.Object({
  success: Type.Boolean(),
  license_file: Type.String(),
  license: LicenseSchema,
});
export type OfflineFile = Static<typeof OfflineFileSchema>;

export const OfflineActivationSchema = Type.Object({ response: Type.String() });
export type OfflineActivation = Static<typeof OfflineActivationSchema>;

export const SeatPoolSchema = Type.Object({ pool: Type.String() });
export type SeatPool = Static<typeof SeatPoolSchema>;

export const LicensePageSchema = Type.Object({
  items: Type.Array(LicenseSchema),
  next_cursor: Nullable(Type.String()),
});
export type LicensePage = Static<typeof LicensePageSchema>;

/** docs/protocol.md 15.6: what an import wrote (or, as a dry run, would write) and what it skipped. */
export const ImportResultSchema = Type.Object({
  imported: Type.Integer(),
  skipped: Type.Array(Type.Object({ key_preview: Type.String(), reason: Type.String() })),
});
export type ImportResult = Static<typeof ImportResultSchema>;

export const GeneratedSchema = Type.Array(Type.Intersect([LicenseSchema, Type.Object({ key: Type.String() })]));
export type Generated = Static<typeof GeneratedSchema>;

export const ExtendAllSchema = Type.Object({ extended: Type.Integer(), skipped: Type.Integer() });

export const EndUserSchema = Type.Object({
  id: Type.String(),
  app_id: Type.String(),
  username: Type.String(),
  created_at: Nullable(Iso),
  last_login: Nullable(Iso),
  level: Type.Integer(),
  expires_at: Nullable(Iso),
  banned: Type.Boolean(),
  license_id: Nullable(Type.String()),
  /** The preview of the key the user is bound to. */
  key_preview: Type.Optional(Nullable(Type.String())),
  reseller_id: Nullable(Type.String()),
  hwid: Type.Optional(Nullable(Type.String())),
  known_hwids: Type.Optional(Type.Array(Type.String())),
  ip: Type.Optional(Nullable(Type.String())),
  known_countries: Type.Optional(Type.Array(Type.String())),
  last_geo: Type.Optional(Geo),
  geo: Type.Optional(Geo),
  activation_geo: Type.Optional(Geo),
  last_screenshot_path: Type.Optional(Nullable(Type.String())),
  devices: Type.Optional(Type.Array(DeviceSchema)),
});
export type EndUser = Static<typeof EndUserSchema>;

export const BanSchema = Type.Object({
  id: Type.String(),
  type: Type.Union([Type.Literal('ip'), Type.Literal('hwid')]),
  value: Type.String(),
  reason: Type.Optional(Type.String()),
  created_at: Iso,
  created_by: Nullable(Type.String()),
});
export type Ban = Static<typeof BanSchema>;

/** Who made a dashboard change (docs/protocol.md 13.3), and through which API token; null for client calls. */
const ActorSchema = Nullable(
  Type.Object({
    id: Type.String(),
    username: Nullable(Type.String()),
    role: Nullable(Type.String()),
    token_id: Type.Optional(Type.String()),
  }),
);

export const LogEntrySchema = Type.Object({
  id: Type.String(),
  time: Iso,
  level: Type.String(),
  action: Type.String(),
  detail: Type.String(),
  ip: Type.Optional(Nullable(Type.String())),
  location: Type.Optional(Nullable(Type.String())),
  screen: Type.Optional(Nullable(Type.String())),
  actor_id: Nullable(Type.String()),
  actor: ActorSchema,
});
export type LogEntry = Static<typeof LogEntrySchema>;

/** One entry of GET /api/audit: who did what outside applications. */
export const AuditEntrySchema = Type.Object({
  id: Type.String(),
  time: Iso,
  level: Type.String(),
  action: Type.String(),
  detail: Type.String(),
  ip: Type.Optional(Type.String()),
  location: Type.Optional(Type.String()),
  actor: ActorSchema,
  browser: Type.Optional(Type.String()),
});
export type AuditEntry = Static<typeof AuditEntrySchema>;

/** An API token as listed (the token itself is shown only when it is made). */
export const ApiTokenSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  scopes: Type.Array(Type.String()),
  app_ids: Nullable(Type.Array(Type.String())),
  expires_at: Nullable(Iso),
  created_at: Iso,
  last_used_at: Nullable(Iso),
  last_used_ip: Nullable(Type.String()),
});
export type ApiToken = Static<typeof ApiTokenSchema>;

export const CreatedTokenSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  token: Type.String(),
  scopes: Type.Array(Type.String()),
  app_ids: Nullable(Type.Array(Type.String())),
  expires_at: Nullable(Iso),
  created_at: Iso,
});
export type CreatedToken = Static<typeof CreatedTokenSchema>;

export const TwoFactorSetupSchema = Type.Object({ secret: Type.String(), otpauth_url: Type.String() });
export type TwoFactorSetup = Static<typeof TwoFactorSetupSchema>;

export const RecoveryCodesSchema = Type.Object({ recovery_codes: Type.Array(Type.String()) });

export const SecurityStateSchema = Type.Object({
  two_factor: Type.Boolean(),
  recovery_codes_left: Type.Integer(),
  two_factor_required: Type.Boolean(),
  require_two_factor: Type.Optional(Type.Boolean()),
  sessions: Type.Array(
    Type.Object({
      id: Type.String(),
      created_at: Iso,
      last_seen_at: Iso,
      ip: Type.String(),
      browser: Type.String(),
      current: Type.Boolean(),
    }),
  ),
});
export type SecurityState = Static<typeof SecurityStateSchema>;

export const SignInSchema = Type.Object({
  id: Type.String(),
  time: Iso,
  success: Type.Boolean(),
  detail: Type.String(),
  ip: Type.String(),
  location: Type.String(),
  browser: Type.String(),
});
export type SignIn = Static<typeof SignInSchema>;

export const WebhookDeliverySchema = Type.Object({
  id: Type.String(),
  event: Type.String(),
  event_id: Type.String(),
  url: Type.String(),
  attempt: Type.Number(),
  status: Nullable(Type.Number()),
  error: Nullable(Type.String()),
  latency_ms: Type.Number(),
  response_excerpt: Type.String(),
  at: Iso,
});
export type WebhookDelivery = Static<typeof WebhookDeliverySchema>;

export const JobSchema = Type.Object({
  id: Type.String(),
  app_id: Type.String(),
  action: Type.String(),
  status: Type.Union([
    Type.Literal('running'),
    Type.Literal('done'),
    Type.Literal('cancelled'),
    Type.Literal('failed'),
  ]),
  total: Type.Number(),
  done: Type.Number(),
  succeeded: Type.Number(),
  skipped: Type.Number(),
  created_at: Iso,
  skipped_keys: Type.Optional(
    Type.Array(Type.Object({ id: Type.String(), key_preview: Nullable(Type.String()), reason: Type.String() })),
  ),
});
export type Job = Static<typeof JobSchema>;

export const StatsSchema = Type.Object({
  keys: Type.Object({
    total: Type.Number(),
    active: Type.Number(),
    banned: Type.Number(),
    unactivated: Type.Number(),
    expired: Type.Number(),
  }),
  users: Type.Number(),
  live_sessions: Type.Number(),
  logins_24h: Type.Number(),
});
export type Stats = Static<typeof StatsSchema>;

export const METRICS = ['activations', 'logins', 'beats', 'new_users'] as const;
export type Metric = (typeof METRICS)[number];
const MetricNumbers = <T extends TSchema>(v: T) => Type.Object({ activations: v, logins: v, beats: v, new_users: v });

/** GET /api/apps/{id}/timeseries: one point per bucket, zeros included. */
export const TimeseriesSchema = Type.Object({
  metric: Type.Union(METRICS.map((m) => Type.Literal(m))),
  bucket: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  points: Type.Array(Type.Object({ t: Type.String({ format: 'date-time' }), n: Type.Number() })),
});
export type Timeseries = Static<typeof TimeseriesSchema>;

/** GET /api/overview: one time axis, and every metric of each application the caller sees. */
export const OverviewSchema = Type.Object({
  bucket: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  t: Type.Array(Type.String({ format: 'date-time' })),
  apps: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      totals: MetricNumbers(Type.Number()),
      series: MetricNumbers(Type.Array(Type.Number())),
    }),
  ),
});
export type Overview = Static<typeof OverviewSchema>;

export const TeamDeleteSchema = Type.Object({ success: Type.Boolean(), adopted_children: Type.Integer() });

/** One frame of GET /api/ws (docs/protocol.md 9). */
export const LiveFrameSchema = Type.Union([
  Type.Object({ type: Type.Literal('subscribed'), app_id: Type.String() }),
  Type.Object({ type: Type.Literal('error'), app_id: Type.Optional(Type.String()), detail: Type.String() }),
  Type.Object({
    type: Type.Literal('event'),
    event: Type.Object({
      id: Type.String(),
      kind: Type.String(),
      app_id: Type.String(),
      at: Type.String(),
      data: Type.Record(Type.String(), Type.Unknown()),
    }),
  }),
]);
export type LiveFrame = Static<typeof LiveFrameSchema>;
