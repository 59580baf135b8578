// The apps module's public surface: applications, their settings and blacklists.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import type { Orm } from '../../platform/db/orm.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Router } from '../../platform/http/router.js';
import type { AccountRepository, DashboardAuth, Principal } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { ClientAppCache } from '../client/index.js';
import type { EventBus } from '../notify/index.js';
import { ApplicationRepository } from './application.repository.js';
import { appsRoutes } from './apps.routes.js';
import { AppsService, scopeOf } from './apps.service.js';
import { BlacklistRepository } from './blacklist.repository.js';
import { EntitlementRepository } from './entitlement.repository.js';

export { scopeOf };
export type { ApplicationRepository, AppsService };
export type { PortalApp } from './application.repository.js';

type ServiceDeps = ConstructorParameters<typeof AppsService>[0];

interface AppsDeps {
  orm: Orm;
  sql: Sql;
  log: Logger;
  now: () => number;
  audit: AuditRepository;
  accounts: AccountRepository;
  appCache: ClientAppCache;
  events: EventBus;
  allowPrivateWebhooks: boolean;
  /** The keys module's side of an application's records (ports compose.ts fills). */
  keys: ServiceDeps['repos']['records'] & {
    keepOnlyEntitlements: ConstructorParameters<typeof EntitlementRepository>[1];
  };
}

/** Builds the apps module: applications, their blacklists and entitlement catalogues. */
export function createApps(d: AppsDeps) {
  const applications = new ApplicationRepository(d.orm, d.sql);
  const blacklist = new BlacklistRepository(d.orm, d.sql);
  const service = new AppsService(
    {
      repos: {
        apps: applications,
        blacklist,
        audit: d.audit,
        accounts: d.accounts,
        entitlements: new EntitlementRepository(d.sql, (appId, codes, tx) =>
          d.keys.keepOnlyEntitlements(appId, codes, tx),
        ),
        records: { counts: (ids, resellerIds) => d.keys.counts(ids, resellerIds) },
      },
      allowPrivateWebhooks: d.allowPrivateWebhooks,
      log: d.log,
      now: d.now,
    },
    d.appCache,
    d.events,
  );
  return {
    service,
    applications,
    /** What the client cache reads of an application's blacklist. */
    blacklist: { values: (appId: string) => blacklist.values(appId) },
    /** The application a blacklist entry belongs to. */
    appOfBan: (id: string) => blacklist.appOf(id),
    /** Ids of the applications a principal reaches now (an API token's app_ids must be among them). */
    reachableApps: async (p: Principal) => (await applications.list(scopeOf(p))).map((a) => a.id),
    /** docs/protocol.md 11.36: the account's own applications, before a token's app_ids narrow them. */
    reachesApp: ({ token: _narrowedBy, ...account }: Principal, appId: string) =>
      applications.reaches(scopeOf(account), appId),
    mount(
      router: Router,
      r: { auth: DashboardAuth; publicUrl: string | undefined; publishedKeys: () => readonly ResponseSigningKey[] },
    ): void {
      appsRoutes(router, { ...r, apps: service });
    },
  };
}
