// Air-gapped machines on the dashboard and the portal (docs/air-gapped.md).
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { PlainLine, compile, parseJson, pathId } from '../../platform/http/validation.js';
import { jsonReply, type IncomingRequest } from '../../platform/http/types.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import type { AirgapService } from './airgap.service.js';

/** A request is about 300 characters; the cap leaves room for components. */
const RequestBody = Type.Object(
  { request: Type.String({ minLength: 1, maxLength: 8192 }) },
  { additionalProperties: false },
);
const PoolBody = Type.Object(
  {
    seats: Type.Integer({ minimum: 1, maximum: 10_000 }),
    valid_days: Type.Integer({ minimum: 1, maximum: 3650 }),
    relay_id: PlainLine(1, 128),
  },
  { additionalProperties: false },
);

export interface AirgapRoutesDeps {
  auth: DashboardAuth;
  airgap: AirgapService;
  /** The portal's authentication (portal module): 413, Origin, 401, as its own routes do. */
  portalCaller: (req: IncomingRequest) => Promise<{ session: { app_id: string; license_id: string } }>;
}

export function airgapRoutes(router: Router, { auth, airgap, portalCaller }: AirgapRoutesDeps): void {
  const portalBody = compile(RequestBody);
  router.add({
    method: 'post',
    path: '/api/apps/:id/offline-activations',
    unprefixed: true,
    doc: {
      summary: "Answer an air-gapped machine's activation request (kwreq1.) with its license file",
      tag: 'licenses',
      auth: 'dashboard',
      body: RequestBody,
      permission: 'owner, admin, developer; resellers in scope with generate_keys',
      responses: { 200: '{"response": FILE}', 422: 'request does not parse or names another application' },
    },
    handler: dashboardHandler({ auth, body: RequestBody }, async ({ principal, params, body, req }) =>
      airgap.answerForDashboard(principal, pathId(params.id, 'app_not_found'), body.request, req.ip),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/portal/offline-activation',
    doc: {
      summary: "Answer the customer's own activation request (kwreq1.) with its license file",
      tag: 'portal',
      auth: 'portal',
      body: RequestBody,
      responses: { 200: '{"response": FILE}', 422: 'request does not parse, or names another application or key' },
    },
    handler: async (req) => {
      const { session } = await portalCaller(req);
      const body = portalBody.parse(parseJson(req.body as Buffer));
      return jsonReply(200, await airgap.answerForPortal(session, body.request, req.ip), {
        'Cache-Control': 'no-store',
      });
    },
  });
  router.add({
    method: 'post',
    path: '/api/licenses/:id/pools',
    unprefixed: true,
    doc: {
      summary: 'Issue a signed seat pool (kwpool1.) for a relay on an air-gapped network',
      tag: 'licenses',
      auth: 'dashboard',
      body: PoolBody,
      permission: 'owner, admin, developer',
      responses: { 200: '{"pool": POOL}' },
    },
    handler: dashboardHandler({ auth, body: PoolBody }, async ({ principal, params, body }) =>
      airgap.issuePool(principal, pathId(params.id, 'license_not_found'), body),
    ),
  });
}
