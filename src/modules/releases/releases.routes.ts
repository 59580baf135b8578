// Routes of releases and updates (docs/releases.md): the dashboard's (releases, artifacts, member
// downloads), the client's upgrade check, and the download links it hands out.
import type { Router } from '../../platform/http/router.js';
import { jsonReply } from '../../platform/http/types.js';
import { pathId } from '../../platform/http/validation.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import { clientDoc, clientHandler, type ClientDeps, type RequestLimiterFactory } from '../client/index.js';
import { ArtifactQuery, CreateReleaseBody, PatchReleaseBody, UpgradeBody } from './releases.requests.js';
import type { ReleasesService } from './releases.service.js';

export interface ReleasesRoutesDeps {
  auth: DashboardAuth;
  gate: ClientDeps;
  limit: RequestLimiterFactory;
}

const MANAGERS = 'owner, admin, developer';
const READERS = 'any account the app is visible to';

export function releasesRoutes(
  router: Router,
  releases: ReleasesService,
  { auth, gate, limit }: ReleasesRoutesDeps,
  maxBytes: number,
): void {
  const app = (id: string | undefined) => pathId(id, 'app_not_found');
  const rel = (id: string | undefined) => pathId(id, 'release_not_found');
  const doc = (summary: string, permission: string, extra: object = {}) => ({
    summary,
    tag: 'releases',
    auth: 'dashboard' as const,
    permission,
    ...extra,
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/releases',
    doc: doc('Create a draft release', MANAGERS, { body: CreateReleaseBody, responses: { 201: 'Created' } }),
    handler: dashboardHandler({ auth, body: CreateReleaseBody }, async ({ principal, params, body }) =>
      jsonReply(201, await releases.create(principal, app(params.id), body)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/releases',
    doc: doc("An application's releases, highest version first", READERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => releases.list(principal, app(params.id))),
  });
  router.add({
    method: 'get',
    path: '/api/releases/:id',
    doc: doc('One release with its artifacts', READERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => releases.get(principal, rel(params.id))),
  });
  router.add({
    method: 'patch',
    path: '/api/releases/:id',
    doc: doc("Change a release's notes, channel or entitlements", MANAGERS, { body: PatchReleaseBody }),
    handler: dashboardHandler({ auth, body: PatchReleaseBody }, async ({ principal, params, body }) =>
      releases.update(principal, rel(params.id), body),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/releases/:id',
    doc: doc('Delete a draft release and its files', MANAGERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await releases.remove(principal, rel(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'post',
    path: '/api/releases/:id/publish',
    doc: doc('Publish a draft (it needs an artifact)', MANAGERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => releases.publish(principal, rel(params.id))),
  });
  router.add({
    method: 'post',
    path: '/api/releases/:id/yank',
    doc: doc('Yank a release: never offered again, its links refused', MANAGERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => releases.yank(principal, rel(params.id))),
  });
  router.add({
    method: 'put',
    path: '/api/releases/:id/artifacts/:filename',
    bodyLimit: maxBytes,
    streamBody: true,
    doc: doc('Upload an artifact: the raw file as the body, streamed to disk (up to ARTIFACT_MAX_MB)', MANAGERS, {
      query: ArtifactQuery,
      responses: { 201: 'Created' },
    }),
    handler: dashboardHandler({ auth, query: ArtifactQuery }, async ({ principal, params, query, req }) => {
      const artifact = await releases.upload(principal, rel(params.id), params.filename ?? '', query, req.upload);
      return jsonReply(201, artifact);
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/releases/:id/artifacts/:filename',
    doc: doc("Remove a draft's artifact", MANAGERS),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await releases.removeArtifact(principal, rel(params.id), params.filename ?? '');
      return { success: true };
    }),
  });
  router.add({
    method: 'get',
    path: '/api/releases/:id/artifacts/:filename',
    doc: doc('Download an artifact (one Range, ETag)', READERS),
    handler: dashboardHandler({ auth }, async ({ principal, params, req }) =>
      releases.memberDownload(principal, rel(params.id), params.filename ?? '', req),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/releases/upgrade',
    doc: clientDoc('The newest release this license may install, with download links', UpgradeBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.releases.upgrade',
        schema: UpgradeBody,
        limiter: limit('license', 20),
        identifiesBy: 'session',
        disabledDetail: 'message',
      },
      (c) => releases.upgrade(c),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/dl/:token',
    doc: {
      summary: 'A download link from the upgrade check (10 minutes; one Range, ETag)',
      tag: 'releases',
      auth: 'none',
    },
    handler: (req) => releases.linkDownload(req.params.token ?? '', req),
  });
}
