// The jobs module's public surface: bulk jobs over an application's keys.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Router } from '../../platform/http/router.js';
import type { Sql } from '../../platform/db/sql.js';
import type { Actor, DashboardAuth, Principal } from '../access/index.js';
import { JobRepository } from './job.repository.js';
import { jobsRoutes } from './jobs.routes.js';
import { JobsService, type KeyActions } from './jobs.service.js';

interface JobsModuleDeps {
  sql: Sql;
  keys: KeyActions;
  audit: {
    write(e: { appId: string; action: string; detail: string; actor: Actor; level?: 'info' | 'warning' }): void;
  };
  notify(accountId: string, data: Record<string, unknown>): Promise<void>;
  actorOf(p: Principal): Actor;
  mayView(viewer: Principal, creatorId: string): Promise<boolean>;
  now: () => number;
  log: Logger;
}

interface Jobs {
  mount(router: Router, auth: DashboardAuth): void;
  /** Waits for the jobs under way (shutdown, tests). */
  drain(): Promise<void>;
}

export function createJobs(deps: JobsModuleDeps): Jobs {
  const service = new JobsService({ ...deps, repo: new JobRepository(deps.sql) });
  return {
    mount: (router, auth) => jobsRoutes(router, { auth, jobs: service }),
    drain: () => service.drain(),
  };
}
