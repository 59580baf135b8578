import { EntitySchema } from '@mikro-orm/core';

// Releases and updates (docs/releases.md). The releases module reads and writes these tables with
// direct SQL; the schemas describe them so the migrations and the entities stay one schema.

/** A version of an application on a channel: a draft, then published, perhaps yanked. */
interface Release {
  id: string;
  appId: string;
  version: string;
  channel: string;
  notes: string;
  /** Entitlement codes a key must hold every one of to be offered it. */
  entitlements: string[];
  status: string;
  createdBy: string | null;
  createdAt: Date;
  publishedAt: Date | null;
  yankedAt: Date | null;
}

export const ReleaseSchema = new EntitySchema<Release>({
  name: 'Release',
  tableName: 'releases',
  uniques: [{ properties: ['appId', 'version'] }],
  indexes: [{ properties: ['appId', 'status'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    version: { type: 'string', length: 255 },
    channel: { type: 'string', length: 8 },
    notes: { type: 'text', default: '' },
    entitlements: { type: 'json', default: '[]' },
    status: { type: 'string', length: 16, default: 'draft' },
    createdBy: { type: 'uuid', nullable: true },
    createdAt: { type: 'datetime' },
    publishedAt: { type: 'datetime', nullable: true },
    yankedAt: { type: 'datetime', nullable: true },
  },
});

/** A file of a release under ARTIFACT_DIR, with its digests and signature. */
interface ReleaseArtifact {
  id: string;
  releaseId: string;
  filename: string;
  platform: string;
  arch: string;
  size: string;
  sha256: string;
  sha512: string;
  signature: string;
  /** The response-signing key that signed it. */
  kid: string;
  downloads: string;
  createdAt: Date;
}

export const ReleaseArtifactSchema = new EntitySchema<ReleaseArtifact>({
  name: 'ReleaseArtifact',
  tableName: 'release_artifacts',
  uniques: [{ properties: ['releaseId', 'filename'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    releaseId: { kind: 'm:1', entity: 'Release', mapToPk: true, fieldName: 'release_id', deleteRule: 'cascade' },
    filename: { type: 'string', length: 255 },
    platform: { type: 'string', length: 32 },
    arch: { type: 'string', length: 32 },
    size: { type: 'bigint' },
    sha256: { type: 'string', length: 64 },
    sha512: { type: 'string', length: 128 },
    signature: { type: 'text' },
    kid: { type: 'string', length: 64 },
    downloads: { type: 'bigint', default: 0 },
    createdAt: { type: 'datetime' },
  },
});

/** One `release.download` audit line per key, artifact and hour: the hour's mark. */
interface ReleaseDownloadMark {
  artifactId: string;
  licenseId: string;
  hour: Date;
}

export const ReleaseDownloadMarkSchema = new EntitySchema<ReleaseDownloadMark>({
  name: 'ReleaseDownloadMark',
  tableName: 'release_download_marks',
  properties: {
    artifactId: {
      kind: 'm:1',
      entity: 'ReleaseArtifact',
      mapToPk: true,
      primary: true,
      fieldName: 'artifact_id',
      deleteRule: 'cascade',
    },
    licenseId: { type: 'uuid', primary: true },
    hour: { type: 'datetime', primary: true },
  },
});
