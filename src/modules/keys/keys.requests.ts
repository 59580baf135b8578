// The key generation body (SPEC key generation), as a TypeBox schema: the route validates and
// documents with it, the generator takes its Static<> type.
import { Type, type Static } from '@sinclair/typebox';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
// PROTOCOL 11.18: free text takes up to 4,096 characters.
const TEXT_MAX = 4096;

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

export type GenerateInput = Static<typeof GenerateBody>;
