// Team request bodies as TypeBox schemas: the routes validate and document with them, the service
// takes their Static<> types.
import { Type, type Static } from '@sinclair/typebox';
import { PERMISSION_KEYS } from '../../platform/db/entities/index.js';

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

export type TeamCreate = Static<typeof TeamCreateBody>;
