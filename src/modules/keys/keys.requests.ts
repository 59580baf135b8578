// The key generation body (SPEC key generation), as a TypeBox schema: the route validates and
// documents with it, the generator takes its Static<> type.
import { Type, type Static } from '@sinclair/typebox';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
// PROTOCOL 11.18: free text takes up to 4,096 characters.
const TEXT_MAX = 4096;
/** PROTOCOL 12.2: a key's bound on live heartbeat sessions (0: unlimited); null: the application's. */
const MaxSessions = Type.Union([Type.Integer({ minimum: 0, maximum: 1000 }), Type.Null()]);

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
  },
  { additionalProperties: false },
);

export type GenerateInput = Static<typeof GenerateBody>;

/** PATCH /api/licenses/{id}: a key's own settings (PROTOCOL 12). */
export const PatchLicenseBody = Type.Object(
  { max_sessions: Type.Optional(MaxSessions) },
  { additionalProperties: false, minProperties: 1 },
);

export type LicensePatch = Static<typeof PatchLicenseBody>;
