import { Type } from '@sinclair/typebox';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from '../access/index.js';
import type { TeamService } from './team.service.js';
import { dashboardHandler } from '../access/index.js';
import { PermissionsObject, TeamCreateBody } from './team.requests.js';
import { pathId } from '../../platform/http/validation.js';

const Password = Type.String({ minLength: 8, maxLength: 128 });
const Uuid = Type.String({ pattern: '^[0-9a-fA-F-]{36}$' });

const PatchBody = Type.Object(
  {
    role: Type.Optional(Type.Union([Type.Literal('admin'), Type.Literal('reseller')])),
    enabled: Type.Optional(Type.Boolean()),
    email: Type.Optional(Type.String({ maxLength: 254, pattern: '^$|^[^@\\s]+@[^@\\s]+$' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
const PermissionsBody = Type.Object({ permissions: PermissionsObject }, { additionalProperties: false });
// docs/spec.md: "full desired list of app ids": a bare array, or {"allowed_apps": [...]}.
const AppsBody = Type.Union([
  Type.Array(Uuid, { maxItems: 1000 }),
  Type.Object({ allowed_apps: Type.Array(Uuid, { maxItems: 1000 }) }, { additionalProperties: false }),
]);
const CreditsBody = Type.Object(
  { amount: Type.Integer({ minimum: -1_000_000_000, maximum: 1_000_000_000 }) },
  { additionalProperties: false },
);
const SubscriptionBody = Type.Object(
  {
    clear: Type.Optional(Type.Literal(true)),
    extend_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 36_500 })),
    expires_at: Type.Optional(Type.String({ maxLength: 40 })),
  },
  { additionalProperties: false },
);
const PasswordBody = Type.Object({ password: Password }, { additionalProperties: false });
// docs/protocol.md 11.18: a webhook URL is free text of up to 4,096 characters.
const WebhookBody = Type.Object({ webhook: Type.String({ maxLength: 4096 }) }, { additionalProperties: false });

interface TeamRoutesDeps {
  auth: DashboardAuth;
  team: TeamService;
}

export function teamRoutes(router: Router, { auth, team }: TeamRoutesDeps): void {
  const id = (v: string | undefined) => pathId(v, 'account_not_found');
  const doc = (summary: string, permission: string, body?: Parameters<typeof dashboardHandler>[0]['body']) => ({
    summary,
    tag: 'team',
    auth: 'dashboard' as const,
    permission,
    ...(body ? { body } : {}),
  });

  router.add({
    method: 'get',
    path: '/api/team',
    doc: doc("Members of the caller's subtree (empty for resellers)", 'owner, admin, developer'),
    handler: dashboardHandler({ auth }, async ({ principal }) =>
      (await team.members(principal)).map((a) => team.view(a)),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/team',
    doc: doc('Create a member (admins create only resellers)', 'owner, admin, developer', TeamCreateBody),
    handler: dashboardHandler({ auth, body: TeamCreateBody }, async ({ principal, body }) =>
      team.view(await team.create(principal, body)),
    ),
  });
  router.add({
    method: 'patch',
    path: '/api/team/:id',
    doc: doc('Change role, enabled or email', 'owner, admin (own subtree), developer', PatchBody),
    handler: dashboardHandler({ auth, body: PatchBody }, async ({ principal, params, body }) =>
      team.view(await team.update(principal, id(params.id), body)),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/team/:id',
    doc: doc('Delete a member; children move to the caller', 'owner, admin (own subtree), developer'),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => ({
      success: true,
      adopted_children: await team.remove(principal, id(params.id)),
    })),
  });
  router.add({
    method: 'patch',
    path: '/api/team/:id/permissions',
    doc: doc('Replace the permission matrix', 'owner, admin (own subtree), developer', PermissionsBody),
    handler: dashboardHandler({ auth, body: PermissionsBody }, async ({ principal, params, body }) =>
      team.view(await team.setPermissions(principal, id(params.id), body.permissions)),
    ),
  });
  router.add({
    method: 'patch',
    path: '/api/team/:id/apps',
    doc: doc(
      'Replace allowed apps (cascades to resellers under an admin)',
      'owner, admin (own subtree), developer',
      AppsBody,
    ),
    handler: dashboardHandler({ auth, body: AppsBody }, async ({ principal, params, body }) =>
      team.view(await team.setApps(principal, id(params.id), Array.isArray(body) ? body : body.allowed_apps)),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/team/:id/credits',
    doc: doc('Add or remove reseller credits', 'owner, admin (own subtree), developer', CreditsBody),
    handler: dashboardHandler({ auth, body: CreditsBody }, async ({ principal, params, body }) =>
      team.view(await team.addCredits(principal, id(params.id), body.amount)),
    ),
  });
  router.add({
    method: 'patch',
    path: '/api/team/:id/subscription',
    doc: doc("Set an admin's subscription", 'owner, developer', SubscriptionBody),
    handler: dashboardHandler({ auth, body: SubscriptionBody }, async ({ principal, params, body }) =>
      team.view(await team.setSubscription(principal, id(params.id), body as never)),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/team/:id/password',
    doc: doc("Set a member's password", 'owner, admin (own resellers), developer', PasswordBody),
    handler: dashboardHandler({ auth, body: PasswordBody }, async ({ principal, params, body }) => {
      await team.setPassword(principal, id(params.id), body.password);
      return { success: true };
    }),
  });
  router.add({
    method: 'patch',
    path: '/api/account/webhook',
    doc: doc("Set the caller's global alert webhook", 'owner, admin, developer', WebhookBody),
    handler: dashboardHandler({ auth, body: WebhookBody }, async ({ principal, body }) =>
      team.view(await team.setOwnWebhook(principal, body.webhook)),
    ),
  });
  router.add({
    method: 'delete',
    path: '/api/team/:id/2fa',
    doc: doc("Clear a member's two-factor sign-in (its sessions end)", 'owner, developer'),
    handler: dashboardHandler({ auth }, async ({ principal, params }) => {
      await team.resetTwoFactor(principal, id(params.id));
      return { success: true };
    }),
  });
  router.add({
    method: 'patch',
    path: '/api/team/:id/webhook',
    doc: doc("Set a member's default webhook", 'owner, admin (own subtree), developer', WebhookBody),
    handler: dashboardHandler({ auth, body: WebhookBody }, async ({ principal, params, body }) =>
      team.view(await team.setMemberWebhook(principal, id(params.id), body.webhook)),
    ),
  });
}
