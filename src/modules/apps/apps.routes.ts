import { Type } from '@sinclair/typebox';
import type { AppDeps } from '../../app.js';
import { dashboardHandler } from '../access/dashboard-route.js';
import { CreateAppBody, GenerateBody, PatchAppBody } from './dashboard-requests.js';
import { pathId } from '../../platform/http/validation.js';
import { AppError, ValidationError } from '../../errors.js';
import { isSdkLang, SDK_LANGS, sdkArchive, sdkFileName } from './sdk-archive.js';
import { appView, banView, licenseView, logView } from './views.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });
const TEXT_MAX = 4096; // PROTOCOL 11.18

const HashesBody = Type.Object(
  {
    hashes: Type.Array(Type.String({ pattern: '^[0-9a-fA-F]{8,128}$' }), { maxItems: 1000 }),
  },
  { additionalProperties: false },
);

const BanBody = Type.Object(
  {
    type: Type.Union([Type.Literal('ip'), Type.Literal('hwid')]),
    value: Str(1, TEXT_MAX),
  },
  { additionalProperties: false },
);

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

export function appsRoutes({ router, domain, s }: AppDeps): void {
  const { auth, apps } = domain;
  const now = () => s.clock.now();

  router.add({
    method: 'post',
    path: '/api/apps',
    unprefixed: true,
    doc: {
      summary: 'Create an application',
      tag: 'apps',
      auth: 'dashboard',
      body: CreateAppBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: CreateAppBody }, async ({ principal, body }) =>
      appView(await apps.create(principal, body), principal, { keys: 0, users: 0 }),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps',
    doc: {
      summary: 'Applications visible to the caller',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'any signed-in account',
    },
    handler: dashboardHandler({ auth }, async ({ principal }) => {
      const list = await apps.list(principal);
      const counts = await apps.counts(list.map((a) => a.id));
      return list.map((a) => appView(a, principal, counts.get(a.id)));
    }),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id',
    doc: {
      summary: 'One application',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'any account the app is visible to',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      const app = await apps.visible(principal, pathId(params.id, 'app_not_found'));
      return appView(app, principal, (await apps.counts([app.id])).get(app.id));
    }),
  });
  router.add({
    method: 'patch',
    path: '/api/apps/:id',
    unprefixed: true,
    doc: {
      summary: 'Change application settings',
      tag: 'apps',
      auth: 'dashboard',
      body: PatchAppBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: PatchAppBody }, async ({ principal, params, body }) =>
      appView(await apps.update(principal, pathId(params.id, 'app_not_found'), body), principal),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/sdk/:lang',
    unprefixed: true,
    doc: {
      summary:
        'Download the client SDK for python, csharp, cpp or typescript ' +
        '(svc_sdk_<lang>.zip: library source, example, keywarden.json)',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params, req }) => {
      const lang = params.lang ?? '';
      if (!isSdkLang(lang))
        throw new ValidationError([
          { loc: ['path', 'lang'], msg: `lang must be one of ${SDK_LANGS.join(', ')}`, type: 'enum' },
        ]);
      if (principal.role === 'reseller') throw new AppError('permission_denied');
      const app = await apps.visible(principal, pathId(params.id, 'app_not_found'));
      // PUBLIC_URL when configured; else the Host this dashboard was reached at (a strict
      // host[:port] only, so a forged Host cannot write arbitrary text into the config).
      const host = req.headers['host'] ?? '';
      const baseUrl =
        s.config.publicUrl ??
        `http://${/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host) ? host : 'localhost:8080'}`;
      const zip = await sdkArchive({ lang, app, keys: s.secrets.publishedKeys, baseUrl });
      return {
        status: 200,
        body: zip,
        headers: {
          'Content-Type': 'application/zip',
          'Content-Disposition': `attachment; filename="${sdkFileName(lang)}"`,
        },
      };
    }),
  });
  router.add({
    method: 'delete',
    path: '/api/apps/:id',
    doc: {
      summary: 'Delete an application with every key, user, log, ban and session (irreversible)',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      const id = pathId(params.id, 'app_not_found');
      await apps.remove(principal, id);
      return { success: true };
    }),
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/rotate-secret',
    unprefixed: true,
    doc: {
      summary: 'Generate a new api_secret',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) =>
      appView(await apps.rotateSecret(principal, pathId(params.id, 'app_not_found')), principal),
    ),
  });
  router.add({
    method: 'put',
    path: '/api/apps/:id/hashes',
    unprefixed: true,
    doc: {
      summary: 'Replace the allowed binary hashes (hash_check)',
      tag: 'apps',
      auth: 'dashboard',
      body: HashesBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: HashesBody }, async ({ principal, params, body }) =>
      appView(await apps.setHashes(principal, pathId(params.id, 'app_not_found'), body.hashes), principal),
    ),
  });
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
      const created = await apps.generateLicenses(principal, pathId(params.id, 'app_not_found'), body);
      return created.map(({ row, key }) => licenseView(row, now(), key));
    }),
  });
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
      (await apps.logs(principal, pathId(params.id, 'app_not_found'), query)).map((r) => logView(r, principal)),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/bans',
    unprefixed: true,
    doc: {
      summary: 'Blacklist an IP or HWID',
      tag: 'blacklist',
      auth: 'dashboard',
      body: BanBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: BanBody }, async ({ principal, params, body }) =>
      banView(await apps.addBan(principal, pathId(params.id, 'app_not_found'), body.type, body.value)),
    ),
  });
  router.add({
    method: 'get',
    path: '/api/apps/:id/bans',
    doc: { summary: 'Blacklist entries', tag: 'blacklist', auth: 'dashboard', permission: 'view_blocked_ips' },
    handler: dashboardHandler({ auth }, async ({ principal, params }) =>
      (await apps.listBans(principal, pathId(params.id, 'app_not_found'))).map(banView),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/bans/:id',
    unprefixed: true,
    doc: {
      summary: 'Remove a blacklist entry',
      tag: 'blacklist',
      auth: 'dashboard',
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await apps.removeBan(principal, pathId(params.id, 'ban_not_found'));
      return { success: true };
    }),
  });
}
