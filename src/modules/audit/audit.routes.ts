// The audit log of an application on the dashboard.
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { pathId } from '../../platform/http/validation.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import type { AuditLog } from './audit.service.js';
import { logView } from './audit.view.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });

const LogsQuery = Type.Object(
  {
    level: Type.Optional(Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error')])),
    action: Type.Optional(Str(1, 64)),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    // audit ids are bigints: 18 digits stay below 2^63 - 1, so no value can overflow the query
    before: Type.Optional(Type.String({ pattern: '^[0-9]{1,18}$' })),
  },
  { additionalProperties: false },
);

interface AuditRoutesDeps {
  auth: DashboardAuth;
  log: AuditLog;
}

export function auditRoutes(router: Router, { auth, log }: AuditRoutesDeps): void {
  router.add({
    method: 'get',
    path: '/api/apps/:id/logs',
    doc: {
      summary: 'Audit log, newest first',
      tag: 'apps',
      auth: 'dashboard',
      query: LogsQuery,
      permission: 'view_auth_logs',
    },
    handler: dashboardHandler({ auth, query: LogsQuery }, async ({ principal, params, query }) =>
      (await log.logs(principal, pathId(params.id, 'app_not_found'), query)).map((r) => logView(r, principal)),
    ),
  });
}
