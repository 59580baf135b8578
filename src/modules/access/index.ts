// The access module's public surface: who calls the dashboard, what it may do and see.
// Other modules and the composition root import only this file.
export { AccessSignal } from './access-signal.js';
export { AccountRepository } from './account.repository.js';
export { AccountSecurity } from './account-security.service.js';
export { accountSecurityRoutes } from './account-security.routes.js';
export { ApiTokenRepository } from './api-token.repository.js';
export { apiTokenRoutes } from './api-tokens.routes.js';
export { authRoutes } from './auth.routes.js';
export { DashboardAuth, type DashboardAuthDeps } from './auth.service.js';
export { bearerToken, dashboardHandler, fromOwnOrigin, headerToken, refuseTokenInQuery } from './dashboard-route.js';
export { assertPasswordPolicy } from './password-policy.js';
export { actorOf, type Actor, effectiveRole, type Principal, requirePermission } from './principal.js';
export { resellerScope } from './record-scope.js';
export { appsPolicy, auditPolicy, keysPolicy, productsPolicy, teamPolicy } from './policies.js';
export { SessionRepository } from './session.repository.js';
export { assertTokenApp, routeScope, TOKEN_SCOPES } from './token-scopes.js';
export { TwoFactorRepository } from './two-factor.repository.js';
export { twoFactorRoutes } from './two-factor.routes.js';
export { browserOf } from './user-agent.js';
export { FULL_SIGHT, type Sight, sightOf, sightOfAccount, visible, visibleColumns } from './visibility.js';
