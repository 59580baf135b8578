// The team module's public surface: owners, admins and resellers: the team tree.
// Other modules and the composition root import only this file.
import type { Orm } from '../../platform/db/orm.js';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from '../access/index.js';
import { teamRoutes } from './team.routes.js';
import { TeamRepository } from './team.repository.js';
import { TeamService } from './team.service.js';

type TeamDeps = ConstructorParameters<typeof TeamService>[0] & { orm: Orm };

/** Builds the team module: the team tree, its members and their settings. */
export function createTeam({ orm, ...d }: TeamDeps) {
  const team = new TeamService(d, new TeamRepository(orm, d.repos.accounts));
  return {
    mount(router: Router, auth: DashboardAuth): void {
      teamRoutes(router, { auth, team });
    },
  };
}
