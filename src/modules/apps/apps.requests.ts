// Request bodies of the applications routes, as TypeBox schemas: the routes validate and document
// with them (OpenAPI), the service takes their Static<> types, so each is written once.
import { Type, type Static } from '@sinclair/typebox';
import { EXPIRED_UPDATES, KEY_COST_TIERS, SESSION_OVERFLOWS } from '../../platform/db/entities/index.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
// docs/protocol.md 11.18: free text takes up to 4,096 characters.
export const TEXT_MAX = 4096;
/** docs/protocol.md 12.1: devices a key may hold, per application and per key. */
const MAX_DEVICES = 1000;

export const CreateAppBody = Type.Object(
  {
    name: Str(1, TEXT_MAX),
    version: Type.Optional(Str(1, 64)),
    description: Type.Optional(Str(0, TEXT_MAX)),
  },
  { additionalProperties: false },
);

// docs/protocol.md 11.1: docs/spec.md's list plus the listed extras; anything else is 422.
export const PatchAppBody = Type.Object(
  {
    name: Type.Optional(Str(1, TEXT_MAX)),
    description: Type.Optional(Str(0, TEXT_MAX)),
    version: Type.Optional(Str(1, 64)),
    enabled: Type.Optional(Type.Boolean()),
    disabled_message: Type.Optional(Str(0, TEXT_MAX)),
    keys_paused: Type.Optional(Type.Boolean()),
    hwid_lock: Type.Optional(Type.Boolean()),
    require_signature: Type.Optional(Type.Boolean()),
    injection_detection: Type.Optional(Type.Boolean()),
    require_heartbeat: Type.Optional(Type.Boolean()),
    force_update: Type.Optional(Type.Boolean()),
    update_url: Type.Optional(Str(0, TEXT_MAX)),
    update_message: Type.Optional(Str(0, TEXT_MAX)),
    force_encryption: Type.Optional(Type.Boolean()),
    hash_check: Type.Optional(Type.Boolean()),
    expected_binary_hash: Type.Optional(
      Type.Union([Type.Literal(''), Type.String({ pattern: '^[0-9a-fA-F]{8,128}$' })]),
    ),
    webhook: Type.Optional(Str(0, TEXT_MAX)),
    key_costs: Type.Optional(
      Type.Object(
        Object.fromEntries(
          KEY_COST_TIERS.map((t) => [
            t,
            Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()])),
          ]),
        ),
        { additionalProperties: false },
      ),
    ),
    heartbeat_interval: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
    // docs/protocol.md 12.2: floating seats.
    max_sessions: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    session_overflow: Type.Optional(Type.Union(SESSION_OVERFLOWS.map((o) => Type.Literal(o)))),
    // docs/protocol.md 12: the licensing models; each at its default keeps docs/spec.md's behaviour.
    max_devices: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_DEVICES })),
    trial_hours: Type.Optional(Type.Integer({ minimum: 0, maximum: 8760 })),
    trial_level: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
    offline_days: Type.Optional(Type.Integer({ minimum: 0, maximum: 3650 })),
    grace_hours: Type.Optional(Type.Integer({ minimum: 0, maximum: 720 })),
    // docs/releases.md "Expired licenses": what an expired key may still receive.
    expired_updates: Type.Optional(Type.Union(EXPIRED_UPDATES.map((o) => Type.Literal(o)))),
    // docs/protocol.md 14.1: the customer portal.
    portal_enabled: Type.Optional(Type.Boolean()),
    portal_reset_cooldown_hours: Type.Optional(Type.Integer({ minimum: 0, maximum: 8760 })),
  },
  { additionalProperties: false, minProperties: 1 },
);

export type AppPatch = Static<typeof PatchAppBody>;

/** docs/protocol.md 12.3: the catalogue replaced whole; codes are unique (checked by the service). */
export const EntitlementsBody = Type.Object(
  {
    entitlements: Type.Array(
      Type.Object(
        {
          code: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9_.-]{1,64}$' }),
          name: Type.Optional(Str(0, 200)),
        },
        { additionalProperties: false },
      ),
      { maxItems: 100 },
    ),
  },
  { additionalProperties: false },
);
