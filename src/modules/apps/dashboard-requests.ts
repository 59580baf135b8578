// Dashboard request bodies that services take as typed input, as TypeBox schemas: http/ validates
// and documents with them (OpenAPI), services take their Static<> types, so each is written once.
import { Type, type Static } from '@sinclair/typebox';
import { KEY_COST_TIERS, PERMISSION_KEYS } from '../../platform/db/entities/index.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
// PROTOCOL 11.18: free text takes up to 4,096 characters.
const TEXT_MAX = 4096;

export const CreateAppBody = Type.Object(
  {
    name: Str(1, TEXT_MAX),
    version: Type.Optional(Str(1, 64)),
    description: Type.Optional(Str(0, TEXT_MAX)),
  },
  { additionalProperties: false },
);

// PROTOCOL 11.1: SPEC's list plus the listed extras; anything else is 422.
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
  },
  { additionalProperties: false, minProperties: 1 },
);

export const GenerateBody = Type.Object(
  {
    amount: Type.Integer({ minimum: 1, maximum: 500 }),
    duration: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650 })),
    unit: Type.Optional(
      Type.Union([
        Type.Literal('hours'),
        Type.Literal('days'),
        Type.Literal('weeks'),
        Type.Literal('months'),
        Type.Literal('lifetime'),
      ]),
    ),
    level: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
    mask: Type.Optional(Str(1, 128)),
    alphabet: Type.Optional(Str(1, 256)),
    note: Type.Optional(Str(0, TEXT_MAX)),
  },
  { additionalProperties: false },
);

const Username = Type.String({ pattern: '^[a-zA-Z0-9_-]{3,32}$' });
const Password = Type.String({ minLength: 8, maxLength: 128 });
const Uuid = Type.String({ pattern: '^[0-9a-fA-F-]{36}$' });
export const PermissionsObject = Type.Object(
  Object.fromEntries(PERMISSION_KEYS.map((k) => [k, Type.Optional(Type.Boolean())])),
  { additionalProperties: false },
);

export const TeamCreateBody = Type.Object(
  {
    username: Username,
    display_name: Type.Optional(Type.String({ maxLength: 100 })),
    password: Password,
    role: Type.Optional(Type.Union([Type.Literal('admin'), Type.Literal('reseller')])),
    email: Type.Optional(Type.String({ maxLength: 254, pattern: '^$|^[^@\\s]+@[^@\\s]+$' })),
    allowed_apps: Type.Optional(Type.Array(Uuid, { maxItems: 1000 })),
    key_quota: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
    notes: Type.Optional(Type.String({ maxLength: 500 })),
    permissions: Type.Optional(PermissionsObject),
  },
  { additionalProperties: false },
);

export type AppPatch = Static<typeof PatchAppBody>;
export type GenerateInput = Static<typeof GenerateBody>;
export type TeamCreate = Static<typeof TeamCreateBody>;
