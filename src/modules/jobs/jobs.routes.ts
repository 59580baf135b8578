// Bulk jobs on the dashboard (docs/api.md "Bulk jobs"): start one over an app's keys, follow it, cancel it.
import { Type, type Static } from '@sinclair/typebox';
import { validationError } from '../../errors.js';
import type { Router } from '../../platform/http/router.js';
import { jsonReply } from '../../platform/http/types.js';
import { pathId } from '../../platform/http/validation.js';
import { dashboardHandler, type DashboardAuth } from '../access/index.js';
import type { JobRecord } from './job.repository.js';
import { JOB_ACTIONS, type JobsService } from './jobs.service.js';

/** At most this many ids in one job (a selection the dashboard sends), 2 MiB of body. */
const MAX_IDS = 50_000;
const JOB_BODY_LIMIT = 2 * 1024 * 1024;

const Uuid = Type.String({ pattern: '^[0-9a-fA-F-]{36}$' });
/** The key listing's filters (GET /api/apps/{id}/licenses). */
const STATUSES = ['unused', 'pending', 'used', 'banned', 'unactivated', 'active', 'expired'] as const;
const Filter = Type.Object(
  {
    status: Type.Optional(Type.Union(STATUSES.map((s) => Type.Literal(s)))),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);
const ExtendParams = Type.Object(
  {
    value: Type.Integer({ minimum: 1, maximum: 3650 * 24 }),
    unit: Type.Union([Type.Literal('hours'), Type.Literal('days'), Type.Literal('weeks'), Type.Literal('months')]),
    subtract: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const NoParams = Type.Object({}, { additionalProperties: false });
const JobBody = Type.Object(
  {
    action: Type.Union(JOB_ACTIONS.map((a) => Type.Literal(a))),
    ids: Type.Optional(Type.Array(Uuid, { minItems: 1, maxItems: MAX_IDS })),
    filter: Type.Optional(Filter),
    params: Type.Optional(Type.Union([ExtendParams, NoParams])),
  },
  { additionalProperties: false },
);

function jobView(j: JobRecord, withSkipped: boolean) {
  return {
    id: j.id,
    app_id: j.appId,
    action: j.action,
    status: j.status,
    total: j.total,
    done: j.done,
    succeeded: j.succeeded,
    skipped: j.skipped,
    created_at: j.createdAt.toISOString(),
    ...(withSkipped ? { skipped_keys: j.skippedKeys } : {}),
  };
}

/** One of ids and filter, and the params the action takes (extend's, or none). */
function checked(body: Static<typeof JobBody>) {
  if ((body.ids === undefined) === (body.filter === undefined))
    throw validationError('filter', 'Give either ids or filter', 'value_error');
  const extend = body.action === 'extend';
  const p = body.params ?? {};
  if (extend && !('value' in p)) throw validationError('params', 'extend takes {value, unit, subtract?}', 'missing');
  if (!extend && Object.keys(p).length > 0) throw validationError('params', `${body.action} takes no params`);
  return body;
}

export function jobsRoutes(router: Router, { auth, jobs }: { auth: DashboardAuth; jobs: JobsService }): void {
  const jobId = (v: string | undefined) => pathId(v, 'job_not_found');
  router.add({
    method: 'post',
    path: '/api/apps/:id/jobs',
    bodyLimit: JOB_BODY_LIMIT,
    doc: {
      summary:
        'Start a bulk job (extend, ban, unban, delete, reset_hwid) over keys given by ids or by the key ' +
        "listing's filters; each key gets the single action's rules; 202 with the job",
      tag: 'licenses',
      auth: 'dashboard',
      body: JobBody,
      permission: "the single action's",
    },
    handler: dashboardHandler({ auth, body: JobBody }, async ({ principal, params, body }) =>
      jsonReply(202, jobView(await jobs.start(principal, pathId(params.id, 'app_not_found'), checked(body)), false)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/jobs/:id',
    doc: {
      summary: 'A bulk job: its progress and the first 1,000 skipped keys with the reason',
      tag: 'licenses',
      auth: 'dashboard',
      permission: 'its creator, and the owners above it',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) =>
      jobView(await jobs.get(principal, jobId(params.id)), true),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/jobs/:id/cancel',
    doc: {
      summary: 'Stop a running job after the chunk in flight',
      tag: 'licenses',
      auth: 'dashboard',
      permission: 'its creator, and the owners above it',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) =>
      jobView(await jobs.cancel(principal, jobId(params.id)), true),
    ),
  });
}
