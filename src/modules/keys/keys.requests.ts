// The key generation body (docs/spec.md "Key generation"), as a TypeBox schema: the route validates and
// documents with it, the generator takes its Static<> type.
import { Type, type Static } from '@sinclair/typebox';
import { PlainLine } from '../../platform/http/validation.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
// docs/protocol.md 11.18: free text takes up to 4,096 characters.
const TEXT_MAX = 4096;
/** docs/protocol.md 12.2: a key's bound on live heartbeat sessions (0: unlimited); null: the application's. */
const MaxSessions = Type.Union([Type.Integer({ minimum: 0, maximum: 1000 }), Type.Null()]);
const MaxDevices = Type.Union([Type.Integer({ minimum: 1, maximum: 1000 }), Type.Null()]);
const Codes = Type.Array(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9_.-]{1,64}$' }), {
  maxItems: 100,
});

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
    max_sessions: Type.Optional(MaxSessions),
    // docs/protocol.md 12.1, 12.3: the key's own device limit (null: the application's) and entitlement codes.
    max_devices: Type.Optional(MaxDevices),
    entitlements: Type.Optional(Codes),
  },
  { additionalProperties: false },
);

export type GenerateInput = Static<typeof GenerateBody>;

/** docs/protocol.md 15.2: what PATCH /api/licenses/{id} may change. */
export const PatchLicenseBody = Type.Object(
  {
    level: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
    note: Type.Optional(Str(0, TEXT_MAX)),
    max_devices: Type.Optional(MaxDevices),
    entitlements: Type.Optional(Codes),
    max_sessions: Type.Optional(MaxSessions),
  },
  { additionalProperties: false, minProperties: 1 },
);

export type LicensePatch = Static<typeof PatchLicenseBody>;

/** docs/protocol.md 12.5: the machine an offline file is issued for. */
export const OfflineIssueBody = Type.Object({ hwid: PlainLine(8, 256) }, { additionalProperties: false });
