// The apps module's public surface: applications, their settings and blacklists.
// Other modules and the composition root import only this file.
export { ApplicationRepository, type ClientAppRow } from './application.repository.js';
export { appsRoutes } from './apps.routes.js';
export { AppsService, scopeOf } from './apps.service.js';
export { BlacklistRepository } from './blacklist.repository.js';
export { EntitlementRepository } from './entitlement.repository.js';
