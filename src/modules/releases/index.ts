// The releases module's public surface (docs/releases.md): releases on channels, artifacts, the
// client's upgrade check and download links. compose.ts calls createReleases and mounts the routes.
import { hkdfSha256 } from '../../platform/crypto/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Router } from '../../platform/http/router.js';
import { ArtifactStore } from './artifact-store.js';
import { DownloadLinks } from './download-links.js';
import { ReleaseRepository } from './releases.repository.js';
import { releasesRoutes, type ReleasesRoutesDeps } from './releases.routes.js';
import { ReleasesService, type ReleasesDeps } from './releases.service.js';

interface CreateReleasesDeps extends Pick<
  ReleasesDeps,
  'apps' | 'standing' | 'audit' | 'events' | 'webhooks' | 'log' | 'now'
> {
  sql: Sql;
  /** ARTIFACT_DIR. */
  artifactDir: string;
  /** ARTIFACT_MAX_MB, in bytes. */
  maxBytes: number;
  signing: () => ResponseSigningKey;
  /** The deployment's session-token key: download links are MACed with a key derived from it. */
  sessionTokenKey: Buffer;
  publicUrl: string | undefined;
}

interface Releases {
  /** The application of a release, for the dashboard's cross-owner reach (null: no such release). */
  appOf(id: string): Promise<string | null>;
  mount(router: Router, deps: ReleasesRoutesDeps): void;
}

export function createReleases(d: CreateReleasesDeps): Releases {
  const repo = new ReleaseRepository(d.sql);
  const service = new ReleasesService({
    ...d,
    repo,
    store: new ArtifactStore(d.artifactDir),
    links: new DownloadLinks(hkdfSha256(d.sessionTokenKey, 'keywarden download link v1', 32)),
  });
  return {
    appOf: (id) => repo.appOf(id),
    mount: (router, deps) => releasesRoutes(router, service, deps, d.maxBytes),
  };
}
