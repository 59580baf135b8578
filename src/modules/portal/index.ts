// The portal module's public surface: customers looking after their own license.
// Other modules and the composition root import only this file.
export { PortalRepository } from './portal.repository.js';
export { portalCaller, portalRoutes } from './portal.routes.js';
export { PortalService } from './portal.service.js';
