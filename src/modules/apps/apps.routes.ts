import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { DashboardAuth } from '../access/index.js';
import type { AppsService } from './apps.service.js';
import { appsPolicy, dashboardHandler } from '../access/index.js';
import { CreateAppBody, EntitlementsBody, PatchAppBody, TEXT_MAX } from './apps.requests.js';
import { pathId } from '../../platform/http/validation.js';
import { ValidationError } from '../../errors.js';
import { isSdkLang, SDK_LANGS, sdkArchive, sdkFileName } from './sdk-archive.js';
import { appView, banView, credentialsView } from './apps.view.js';

const Str = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });

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
    reason: Type.Optional(Str(0, 500)),
  },
  { additionalProperties: false },
);

interface AppsRoutesDeps {
  auth: DashboardAuth;
  apps: AppsService;
  /** PUBLIC_URL, written into SDK downloads; unset: the Host the dashboard was reached at. */
  publicUrl: string | undefined;
  /** The response-signing public keys an SDK download pins. */
  publishedKeys: () => readonly ResponseSigningKey[];
}

export function appsRoutes(router: Router, { auth, apps, publicUrl, publishedKeys }: AppsRoutesDeps): void {
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
      const counts = await apps.counts(
        principal,
        list.map((a) => a.id),
      );
      return list.map((a) => appView(a, principal, counts?.get(a.id)));
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
      return appView(app, principal, (await apps.counts(principal, [app.id]))?.get(app.id));
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
        'Download the client SDK for python, csharp, cpp, typescript, go or java ' +
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
      appsPolicy.assertManage(principal);
      const app = await apps.visible(principal, pathId(params.id, 'app_not_found'));
      // PUBLIC_URL when configured; else the Host this dashboard was reached at (a strict
      // host[:port] only, so a forged Host cannot write arbitrary text into the config).
      const host = req.headers['host'] ?? '';
      const baseUrl =
        publicUrl ??
        `http://${/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host) ? host : 'localhost:8080'}`;
      const zip = await sdkArchive({ lang, app, keys: publishedKeys(), baseUrl });
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
    method: 'get',
    path: '/api/apps/:id/entitlements',
    doc: {
      summary: 'The entitlement catalogue',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'any account the app is visible to',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => ({
      entitlements: await apps.entitlements(principal, pathId(params.id, 'app_not_found')),
    })),
  });
  router.add({
    method: 'put',
    path: '/api/apps/:id/entitlements',
    doc: {
      summary: 'Replace the entitlement catalogue (a removed code leaves every key)',
      tag: 'apps',
      auth: 'dashboard',
      body: EntitlementsBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: EntitlementsBody }, async ({ principal, params, body }) => ({
      entitlements: await apps.setEntitlements(principal, pathId(params.id, 'app_not_found'), body.entitlements),
    })),
  });
  router.add({
    method: 'post',
    path: '/api/apps/:id/bans',
    unprefixed: true,
    doc: {
      summary: 'Blacklist an IP, a CIDR range of IPs or a HWID, with an optional reason',
      tag: 'blacklist',
      auth: 'dashboard',
      body: BanBody,
      permission: 'owner, admin, developer',
    },
    handler: dashboardHandler({ auth, body: BanBody }, async ({ principal, params, body }) =>
      banView(await apps.addBan(principal, pathId(params.id, 'app_not_found'), body.type, body.value, body.reason)),
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
  router.add({
    method: 'get',
    path: '/api/apps/:id/credentials',
    doc: {
      summary: 'The credentials card: api_key, api_secret (not for resellers), owner id',
      tag: 'apps',
      auth: 'dashboard',
      permission: 'any account the app is visible to',
    },
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      return credentialsView(await apps.visible(principal, pathId(params.id, 'app_not_found')), principal);
    }),
  });
}
