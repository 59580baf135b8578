// The audit log on the dashboard: an application's log, the account audit (who did what outside
// applications) and the caller's own sign-ins.
import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import { pathId } from '../../platform/http/validation.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import type { AuditLog } from './audit.service.js';
import { accountEntryView, logView, signInView } from './audit.view.js';
import { csvReply } from '../../platform/http/csv.js';
import { sightOf, visibleColumns } from '../access/index.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 }));
// audit ids are bigints: 18 digits stay below 2^63 - 1, so no value can overflow the query
const Before = Type.Optional(Type.String({ pattern: '^[0-9]{1,18}$' }));

const LogsQuery = Type.Object(
  {
    level: Type.Optional(Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error')])),
    action: Type.Optional(Str(1, 64)),
    actor: Type.Optional(Str(1, 32)),
    q: Type.Optional(Str(1, 200)),
    from: Type.Optional(Str(1, 40)),
    to: Type.Optional(Str(1, 40)),
    limit: Limit,
    before: Before,
  },
  { additionalProperties: false },
);

const LogsExportQuery = Type.Object(
  {
    level: Type.Optional(Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error')])),
    action: Type.Optional(Str(1, 64)),
    actor: Type.Optional(Str(1, 32)),
    q: Type.Optional(Str(1, 200)),
    from: Type.Optional(Str(1, 40)),
    to: Type.Optional(Str(1, 40)),
  },
  { additionalProperties: false },
);

/** The log export's columns; `actor` is the actor's username (hidden columns are left out). */
const LOG_CSV = ['id', 'time', 'level', 'action', 'detail', 'actor', 'ip', 'location', 'screen'];

const AccountQuery = Type.Object(
  { action: Type.Optional(Str(1, 64)), actor: Type.Optional(Str(1, 32)), limit: Limit, before: Before },
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
      summary:
        'Audit log, newest first (actor: who made a dashboard change, and through which token); ' +
        'q: text in the detail or actor, from/to: ISO times',
      tag: 'apps',
      auth: 'dashboard',
      query: LogsQuery,
      permission: 'view_auth_logs',
    },
    handler: dashboardHandler({ auth, query: LogsQuery }, async ({ principal, params, query }) =>
      (await log.logs(principal, pathId(params.id, 'app_not_found'), query)).map((r) => logView(r, principal)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/logs/export.csv',
    doc: {
      summary: "Audit log as CSV (the listing's filters, scoping and hiding; streamed)",
      tag: 'apps',
      auth: 'dashboard',
      query: LogsExportQuery,
      permission: 'view_auth_logs',
      responses: { 200: 'text/csv with a header row' },
    },
    handler: dashboardHandler({ auth, query: LogsExportQuery }, ({ principal, params, query }) => {
      const appId = pathId(params.id, 'app_not_found');
      const columns = visibleColumns(sightOf(principal), LOG_CSV);
      return csvReply(
        `logs-${appId}.csv`,
        columns,
        (async function* () {
          for await (const rows of log.logPages(principal, appId, query))
            yield rows.map((r) => {
              const v = logView(r, principal) as Record<string, unknown>;
              const actor = v.actor as { username?: string } | null | undefined;
              return columns.map((c) => (c === 'actor' ? (actor?.username ?? '') : v[c]));
            });
        })(),
      );
    }),
  });
  router.add({
    method: 'get',
    path: '/api/audit',
    doc: {
      summary:
        'Account audit, newest first: sign-ins, second factor, tokens, team changes (an owner its tree, ' +
        'an admin its subtree, a reseller its own)',
      tag: 'audit',
      auth: 'dashboard',
      query: AccountQuery,
      permission: 'any signed-in account',
    },
    handler: dashboardHandler({ auth, query: AccountQuery }, async ({ principal, query }) =>
      (await log.account(principal, query)).map((r) => accountEntryView(r, principal)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/account/sign-ins',
    doc: {
      summary: "The caller's recent sign-ins, failed ones included: time, address, browser",
      tag: 'account',
      auth: 'dashboard',
      permission: 'any signed-in account (not a token)',
    },
    handler: dashboardHandler({ auth }, async ({ principal }) => (await log.signIns(principal)).map(signInView)),
  });
}
