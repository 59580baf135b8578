import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from '../access/index.js';
import { TIMESERIES_METRICS, type KeysAdminService } from './keys.service.js';
import type { KeyGenerator } from './generate.service.js';
import { GenerateBody, OfflineIssueBody, PatchLicenseBody } from './keys.requests.js';
import { LICENSE_STATUS_FILTERS } from './license-status.js';
import { dashboardHandler } from '../access/index.js';
import { pathId } from '../../platform/http/validation.js';
import { AppError, ValidationError } from '../../errors.js';
import { hiddenLicenseView, licenseView, userView } from './keys.view.js';
import { licensesCsv, usersCsv } from './keys.export.js';
import { IMPORT_BODY_LIMIT, IMPORT_MAX_KEYS } from './keys.import.js';

const TimeUnit = Type.Union([
  Type.Literal('hours'),
  Type.Literal('days'),
  Type.Literal('weeks'),
  Type.Literal('months'),
]);

const ListQuery = Type.Object(
  {
    status: Type.Optional(Type.Union(LICENSE_STATUS_FILTERS.map((s) => Type.Literal(s)))),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
const LicenseExportQuery = Type.Object(
  {
    status: Type.Optional(Type.Union(LICENSE_STATUS_FILTERS.map((s) => Type.Literal(s)))),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);
const UserExportQuery = Type.Object(
  { q: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })) },
  { additionalProperties: false },
);
const ImportBody = Type.Object(
  {
    format: Type.Union([Type.Literal('list'), Type.Literal('keyauth')]),
    // Rows are read one by one (keys.import.ts), so an invalid row's 422 names its index.
    keys: Type.Array(Type.Unknown(), { minItems: 1, maxItems: IMPORT_MAX_KEYS }),
  },
  { additionalProperties: false },
);
const ImportQuery = Type.Object(
  { dry_run: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])) },
  { additionalProperties: false },
);
const SeriesRange = {
  bucket: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')])),
  from: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
  to: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
};
const TimeseriesQuery = Type.Object(
  { metric: Type.Union(TIMESERIES_METRICS.map((m) => Type.Literal(m))), ...SeriesRange },
  { additionalProperties: false },
);
const OverviewQuery = Type.Object(SeriesRange, { additionalProperties: false });
const UsersQuery = Type.Object(
  {
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
const ExtendBody = Type.Object(
  {
    value: Type.Integer({ minimum: 1, maximum: 3650 * 24 }),
    unit: TimeUnit,
    subtract: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const ExtendAllBody = Type.Object(
  { value: Type.Integer({ minimum: 1, maximum: 3650 * 24 }), unit: TimeUnit },
  { additionalProperties: false },
);
const BanToggle = Type.Object({ banned: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
const UserBan = Type.Object({ banned: Type.Boolean() }, { additionalProperties: false });

/** A HWID in a path (percent-decoded by the router or not): 8-256 characters, else no such device. */
function deviceHwid(raw: string | undefined): string {
  let h = raw ?? '';
  try {
    h = decodeURIComponent(h);
  } catch {
    throw new AppError('device_not_found');
  }
  if (h.length < 8 || h.length > 256) throw new AppError('device_not_found');
  return h;
}

interface KeysRoutesDeps {
  auth: DashboardAuth;
  keys: KeysAdminService;
  generator: KeyGenerator;
  /** Live heartbeat sessions of an app (the stats' live_sessions). */
  liveSessions: (appId: string) => number;
  /** Live heartbeat sessions of each key (key rows' live_sessions, docs/protocol.md 12.2). */
  liveSeats: (licenseIds: readonly string[]) => Promise<Map<string, number>>;
  now: () => number;
}

/** An ISO date or time from the query string; anything else is 422 on that parameter. */
function isoTime(name: string, v: string | undefined): Date | undefined {
  if (v === undefined) return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:\d{2})?)?$/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms))
    throw new ValidationError([
      { loc: ['query', name], msg: `${name} must be an ISO date or time`, type: 'value_error' },
    ]);
  return new Date(ms);
}

export function keysRoutes(
  router: Router,
  { auth, keys, generator, liveSessions, liveSeats, now }: KeysRoutesDeps,
): void {
  const lic = (id: string | undefined) => pathId(id, 'license_not_found');
  const usr = (id: string | undefined) => pathId(id, 'user_not_found');

  router.add({
    method: 'post',
    path: '/api/apps/:id/licenses',
    unprefixed: true,
    doc: {
      summary: 'Generate license keys (plaintext returned only here)',
      tag: 'licenses',
      auth: 'dashboard',
      body: GenerateBody,
      permission: 'generate_keys',
    },
    handler: dashboardHandler({ auth, body: GenerateBody }, async ({ principal, params, body }) => {
      const created = await generator.generateLicenses(principal, pathId(params.id, 'app_not_found'), body);
      return created.map(({ row, key }) => licenseView(row, now(), key));
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/licenses',
    doc: {
      summary: 'License keys, newest first (metadata only)',
      tag: 'licenses',
      auth: 'dashboard',
      query: ListQuery,
      permission: 'view_keys',
    },
    handler: dashboardHandler({ auth, query: ListQuery }, async ({ principal, params, query }) => {
      const { rows, nextCursor } = await keys.listLicenses(principal, pathId(params.id, 'app_not_found'), query);
      const live = await liveSeats(rows.map((r) => r.id));
      return {
        items: rows.map((r) => hiddenLicenseView(principal, r, now(), live.get(r.id) ?? 0)),
        next_cursor: nextCursor,
      };
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/licenses/export.csv',
    doc: {
      summary: "Keys as CSV (the listing's filters, scoping and hiding; streamed)",
      tag: 'licenses',
      auth: 'dashboard',
      query: LicenseExportQuery,
      permission: 'view_keys',
      responses: { 200: 'text/csv with a header row' },
    },
    handler: dashboardHandler({ auth, query: LicenseExportQuery }, ({ principal, params, query }) =>
      licensesCsv(keys, principal, pathId(params.id, 'app_not_found'), query, now),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/licenses/import',
    bodyLimit: IMPORT_BODY_LIMIT,
    doc: {
      summary:
        'Import existing keys (list or KeyAuth rows, up to 50,000, body up to 8 MiB); ?dry_run=true reports ' +
        'what would be imported and skipped without writing',
      tag: 'licenses',
      auth: 'dashboard',
      body: ImportBody,
      query: ImportQuery,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: ImportBody, query: ImportQuery }, ({ principal, params, body, query }) =>
      generator.importKeys(
        principal,
        pathId(params.id, 'app_not_found'),
        body.format,
        body.keys,
        query.dry_run === 'true',
      ),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/licenses/:id/extend',
    unprefixed: true,
    doc: {
      summary: 'Add or subtract time',
      tag: 'licenses',
      auth: 'dashboard',
      body: ExtendBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: ExtendBody }, async ({ principal, params, body }) =>
      licenseView(await keys.extend(principal, lic(params.id), body.value, body.unit, body.subtract ?? false), now()),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/licenses/extend-all',
    unprefixed: true,
    doc: {
      summary: 'Extend every active key',
      tag: 'licenses',
      auth: 'dashboard',
      body: ExtendAllBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: ExtendAllBody }, async ({ principal, params, body }) =>
      keys.extendAll(principal, pathId(params.id, 'app_not_found'), body.value, body.unit),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/licenses/:id/reset-hwid',
    unprefixed: true,
    doc: { summary: "Clear a key's HWID binding", tag: 'licenses', auth: 'dashboard', permission: 'reset_hwid' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.resetLicenseHwid(principal, lic(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'patch',
    path: '/api/licenses/:id/ban',
    unprefixed: true,
    doc: {
      summary: 'Ban or unban a key (no body: toggle)',
      tag: 'licenses',
      auth: 'dashboard',
      body: BanToggle,
      permission: 'ban_unban_keys',
    },
    handler: dashboardHandler({ auth, body: BanToggle }, async ({ principal, params, body }) =>
      hiddenLicenseView(principal, await keys.banLicense(principal, lic(params.id), body.banned), now()),
    ),
  });
  router.add({
    method: 'patch',
    path: '/api/licenses/:id',
    unprefixed: true,
    doc: {
      summary: 'Change level, note, max_devices, max_sessions or entitlements of a key',
      tag: 'licenses',
      auth: 'dashboard',
      body: PatchLicenseBody,
      permission: 'owner, admin, developer; resellers in scope with generate_keys',
    },
    handler: dashboardHandler({ auth, body: PatchLicenseBody }, async ({ principal, params, body }) => {
      const row = await keys.update(principal, lic(params.id), body);
      const live = await liveSeats([row.id]);
      return hiddenLicenseView(principal, row, now(), live.get(row.id) ?? 0);
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/licenses/:id/devices/:hwid',
    unprefixed: true,
    doc: { summary: 'Remove one device from a key', tag: 'licenses', auth: 'dashboard', permission: 'reset_hwid' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.removeLicenseDevice(principal, lic(params.id), deviceHwid(params.hwid));
      return { success: true };
    }),
  });
  router.add({
    method: 'post',
    path: '/api/licenses/:id/offline',
    unprefixed: true,
    doc: {
      summary: 'Issue an offline license file for an air-gapped machine (binds the HWID)',
      tag: 'licenses',
      auth: 'dashboard',
      body: OfflineIssueBody,
      permission: 'owner, admin, developer; resellers in scope with generate_keys',
    },
    handler: dashboardHandler({ auth, body: OfflineIssueBody }, async ({ principal, params, body }) => {
      const { license_file, row } = await keys.issueOffline(principal, lic(params.id), body.hwid);
      return { success: true, license_file, license: hiddenLicenseView(principal, row, now()) };
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/licenses/:id',
    unprefixed: true,
    doc: { summary: 'Delete a key permanently', tag: 'licenses', auth: 'dashboard', permission: 'delete_keys' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.deleteLicense(principal, lic(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/users',
    doc: {
      summary:
        'End users, newest first: at most 2000 as an array; with q, limit or cursor one page ' +
        '{items, next_cursor} (q: username, key preview or the full key)',
      tag: 'users',
      auth: 'dashboard',
      query: UsersQuery,
      permission: 'view_keys',
    },
    handler: dashboardHandler({ auth, query: UsersQuery }, async ({ principal, params, query }) => {
      const { rows, nextCursor } = await keys.listUsers(principal, pathId(params.id, 'app_not_found'), query);
      const items = rows.map((u) => userView(principal, u));
      // The plain listing keeps docs/spec.md's shape; asking for a page (or a search) gets the cursor too.
      const paged = query.q !== undefined || query.limit !== undefined || query.cursor !== undefined;
      return paged ? { items, next_cursor: nextCursor } : items;
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/users/export.csv',
    doc: {
      summary: "End users as CSV (the listing's search, scoping and hiding; streamed)",
      tag: 'users',
      auth: 'dashboard',
      query: UserExportQuery,
      permission: 'view_keys',
      responses: { 200: 'text/csv with a header row' },
    },
    handler: dashboardHandler({ auth, query: UserExportQuery }, ({ principal, params, query }) =>
      usersCsv(keys, principal, pathId(params.id, 'app_not_found'), query),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/users/:id/reset-hwid',
    doc: { summary: "Clear a user's HWID lock", tag: 'users', auth: 'dashboard', permission: 'reset_hwid' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.resetUserHwid(principal, usr(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/users/:id/devices/:hwid',
    doc: { summary: 'Remove one device from a user', tag: 'users', auth: 'dashboard', permission: 'reset_hwid' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.removeUserDevice(principal, usr(params.id), deviceHwid(params.hwid));
      return { success: true };
    }),
  });
  router.add({
    method: 'patch',
    path: '/api/users/:id/ban',
    doc: {
      summary: 'Ban (freeze) or unban a user',
      tag: 'users',
      auth: 'dashboard',
      body: UserBan,
      permission: 'freeze_unfreeze',
    },
    handler: dashboardHandler({ auth, body: UserBan }, async ({ principal, params, body }) => {
      await keys.banUser(principal, usr(params.id), body.banned);
      return { success: true };
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/users/:id',
    doc: {
      summary: 'Delete a user (its key stays and can be registered again)',
      tag: 'users',
      auth: 'dashboard',
      permission: 'delete_keys',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await keys.deleteUser(principal, usr(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/timeseries',
    doc: {
      summary:
        'Counts over time: activations, logins, accepted heartbeats or new users per hour or UTC day in ' +
        '[from, to) (ISO), zeros included, scoped like the stats',
      tag: 'apps',
      auth: 'dashboard',
      query: TimeseriesQuery,
      permission: 'view_stats',
    },
    handler: dashboardHandler({ auth, query: TimeseriesQuery }, ({ principal, params, query }) =>
      keys.timeseries(principal, pathId(params.id, 'app_not_found'), {
        metric: query.metric,
        bucket: query.bucket ?? 'day',
        from: isoTime('from', query.from),
        to: isoTime('to', query.to),
      }),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/overview',
    doc: {
      summary:
        'Every chart metric of every application the caller sees, per hour or UTC day in [from, to) ' +
        '(at most 400 buckets): totals and series, scoped like the stats',
      tag: 'apps',
      auth: 'dashboard',
      query: OverviewQuery,
      permission: 'view_stats',
    },
    handler: dashboardHandler({ auth, query: OverviewQuery }, ({ principal, query }) =>
      keys.overview(principal, {
        bucket: query.bucket ?? 'day',
        from: isoTime('from', query.from),
        to: isoTime('to', query.to),
      }),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/stats',
    doc: { summary: 'Key, user and session counts', tag: 'apps', auth: 'dashboard', permission: 'view_stats' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      const appId = pathId(params.id, 'app_not_found');
      return keys.stats(principal, appId, liveSessions(appId));
    }),
  });
}
