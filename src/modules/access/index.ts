// The access module's public surface: who calls the dashboard, what it may do and see.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { Orm } from '../../platform/db/orm.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Router } from '../../platform/http/router.js';
import { AccessSignal } from './access-signal.js';
import { AccountRepository } from './account.repository.js';
import { AccountSecurity } from './account-security.service.js';
import { accountSecurityRoutes } from './account-security.routes.js';
import { ApiTokenRepository } from './api-token.repository.js';
import { apiTokenRoutes } from './api-tokens.routes.js';
import { authRoutes } from './auth.routes.js';
import { DashboardAuth, type DashboardAuthDeps } from './auth.service.js';
import type { AuditWriter } from './principal.js';
import { SessionRepository } from './session.repository.js';
import { TwoFactorRepository } from './two-factor.repository.js';
import { twoFactorRoutes } from './two-factor.routes.js';

export type { AccessSignal, AccountRepository, DashboardAuth, SessionRepository };
export { bearerToken, dashboardHandler, fromOwnOrigin, headerToken, refuseTokenInQuery } from './dashboard-route.js';
export { assertPasswordPolicy } from './password-policy.js';
export { actorOf, type Actor, effectiveRole, overseesAccount, type Principal, requirePermission } from './principal.js';
export { resellerScope } from './record-scope.js';
export { appsPolicy, auditPolicy, keysPolicy, productsPolicy, teamPolicy } from './policies.js';
export { assertTokenApp, routeScope, TOKEN_SCOPES } from './token-scopes.js';
export { browserOf } from './user-agent.js';
export { FULL_SIGHT, type Sight, sightOf, sightOfAccount, visible, visibleColumns } from './visibility.js';

/** What the access module needs; `reach` comes from the modules that own applications and records. */
export interface AccessDeps {
  orm: Orm;
  sql: Sql;
  coordinator: Coordinator;
  log: Logger;
  now: () => number;
  secrets: { twoFactorKey: Buffer; apiTokenKey: Buffer };
  developerEmails: readonly string[];
  /** Origins besides a request's own Host that the web dashboard is served from (PUBLIC_URL). */
  trustedOrigins: readonly string[];
  audit: AuditWriter;
  reach: Pick<DashboardAuthDeps, 'reachableApps' | 'reachesApp' | 'recordApp'>;
}

/** Builds the access module: its repositories, sign-in, the caller's own security, the access signal. */
export function createAccess(d: AccessDeps) {
  const accounts = new AccountRepository(d.orm);
  const sessions = new SessionRepository(d.orm);
  const signal = new AccessSignal(d.coordinator, d.log);
  const auth = new DashboardAuth({
    access: signal,
    repos: { accounts, sessions, apiTokens: new ApiTokenRepository(d.orm), twoFactor: new TwoFactorRepository(d.sql) },
    secrets: d.secrets,
    coordinator: d.coordinator,
    developerEmails: d.developerEmails,
    log: d.log,
    now: d.now,
    audit: d.audit,
    ...d.reach,
    trustedOrigins: d.trustedOrigins,
  });
  const security = new AccountSecurity({
    sessions,
    twoFactor: auth.twoFactor,
    now: d.now,
    audit: d.audit,
    access: signal,
  });
  return {
    accounts,
    sessions,
    auth,
    /** Tells live streams on every worker to re-check what their subscribers may see. */
    signal,
    mount(router: Router): void {
      authRoutes(router, { auth });
      twoFactorRoutes(router, { auth });
      apiTokenRoutes(router, { auth });
      accountSecurityRoutes(router, { auth, security });
    },
  };
}
