// The access module's public surface: who calls the dashboard, what it may do and see.
// Other modules and the composition root import only this file.
export { AccessSignal } from './access-signal.js';
export { AccountRepository } from './account.repository.js';
export { authRoutes } from './auth.routes.js';
export { DashboardAuth, type DashboardAuthDeps } from './auth.service.js';
export { bearerToken, dashboardHandler, fromOwnOrigin, headerToken } from './dashboard-route.js';
export { assertPasswordPolicy } from './password-policy.js';
export { effectiveRole, type Principal, requirePermission, requireRole } from './principal.js';
export { resellerScope } from './record-scope.js';
export { SessionRepository } from './session.repository.js';
export { FULL_SIGHT, type Sight, sightOf, sightOfAccount, visible } from './visibility.js';
