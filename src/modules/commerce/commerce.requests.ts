// Request bodies of products (docs/protocol.md 14.4) as TypeBox schemas: the routes validate and document with
// them; the generation settings are checked once more by the key generator's own rules at save time.
import { Type, type Static } from '@sinclair/typebox';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
const TEXT_MAX = 4096;

const Unit = Type.Union([
  Type.Literal('hours'),
  Type.Literal('days'),
  Type.Literal('weeks'),
  Type.Literal('months'),
  Type.Literal('lifetime'),
]);

/** Entitlement codes (docs/protocol.md 12.3's shape). */
const Entitlements = Type.Array(Type.String({ pattern: '^[a-z0-9_.-]{1,64}$' }), {
  maxItems: 100,
  uniqueItems: true,
});

const productFields = {
  name: Str(1, TEXT_MAX),
  duration: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650 })),
  unit: Type.Optional(Unit),
  level: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_147_483_647 })),
  mask: Type.Optional(Str(1, 128)),
  alphabet: Type.Optional(Str(1, 256)),
  entitlements: Type.Optional(Entitlements),
  note: Type.Optional(Str(0, TEXT_MAX)),
};

export const CreateProductBody = Type.Object(productFields, { additionalProperties: false });
export type ProductInput = Static<typeof CreateProductBody>;

export const PatchProductBody = Type.Partial(
  Type.Object({
    ...productFields,
    // Stripe makes the endpoint's signing secret itself (whsec_...): it is pasted here instead of ours.
    webhook_secret: Type.String({ pattern: '^(whsec_[A-Za-z0-9_+/=-]{16,200}|[0-9a-f]{64})$' }),
  }),
  { additionalProperties: false, minProperties: 1 },
);
export type ProductPatch = Static<typeof PatchProductBody>;
