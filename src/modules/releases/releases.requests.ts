// Request bodies of releases (docs/releases.md) as TypeBox schemas: the routes validate and document
// with them. A version's SemVer form is checked by the service (422 on `version`).
import { Type, type Static } from '@sinclair/typebox';

export const CHANNELS = ['stable', 'rc', 'beta', 'alpha', 'dev'] as const;
export type Channel = (typeof CHANNELS)[number];
const Channel = Type.Union(CHANNELS.map((c) => Type.Literal(c)));

const Entitlements = Type.Array(Type.String({ pattern: '^[a-z0-9_.-]{1,64}$' }), { maxItems: 100, uniqueItems: true });

export const CreateReleaseBody = Type.Object(
  {
    version: Type.String({ minLength: 1, maxLength: 255 }),
    channel: Type.Optional(Channel),
    notes: Type.Optional(Type.String({ maxLength: 10_000 })),
    entitlements: Type.Optional(Entitlements),
  },
  { additionalProperties: false },
);
export type ReleaseInput = Static<typeof CreateReleaseBody>;

export const PatchReleaseBody = Type.Object(
  {
    channel: Type.Optional(Channel),
    notes: Type.Optional(Type.String({ maxLength: 10_000 })),
    entitlements: Type.Optional(Entitlements),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type ReleasePatch = Static<typeof PatchReleaseBody>;

/** Platform and arch of an artifact: 1-32 of [a-z0-9_], `any` when absent. */
const TARGET = '^[a-z0-9_]{1,32}$';

export const ArtifactQuery = Type.Object(
  {
    platform: Type.Optional(Type.String({ pattern: TARGET })),
    arch: Type.Optional(Type.String({ pattern: TARGET })),
  },
  { additionalProperties: false },
);

export const FILENAME = /^[A-Za-z0-9._-]{1,255}$/;

/** The client's upgrade check (unknown fields are ignored, as on every client call). */
export const UpgradeBody = Type.Object({
  session: Type.String({ minLength: 1, maxLength: 128 }),
  version: Type.String({ minLength: 1, maxLength: 255 }),
  channel: Type.Optional(Channel),
  platform: Type.Optional(Type.String({ pattern: TARGET })),
  arch: Type.Optional(Type.String({ pattern: TARGET })),
  init_iv: Type.Optional(Type.String({ maxLength: 256 })),
});
export type UpgradeRequest = Static<typeof UpgradeBody>;
