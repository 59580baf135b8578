// The team module's public surface: owners, admins and resellers: the team tree.
// Other modules and the composition root import only this file.
export { teamRoutes } from './team.routes.js';
export { TeamRepository } from './team.repository.js';
export { TeamService } from './team.service.js';
