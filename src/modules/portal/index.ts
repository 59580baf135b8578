// The portal module's public surface: customers looking after their own license.
// Other modules and the composition root import only this file.
import type { Sql } from '../../platform/db/sql.js';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import type { Router } from '../../platform/http/router.js';
import { PortalRepository } from './portal.repository.js';
import { portalCaller, portalRoutes } from './portal.routes.js';
import { PortalService } from './portal.service.js';

type PortalDeps = Omit<ConstructorParameters<typeof PortalService>[0], 'repo'> & {
  sql: Sql;
  /** The keys module: every device of a key and of its end user cleared, inside a transaction. */
  clearDevices: ConstructorParameters<typeof PortalRepository>[1];
};

/** Builds the portal module: the customer's sign-in, its key, devices and offline file. */
export function createPortal({ sql, clearDevices, ...d }: PortalDeps) {
  const portal = new PortalService({ ...d, repo: new PortalRepository(sql, clearDevices) });
  return {
    mount(router: Router, r: { limiter: RequestLimiter; trustedOrigins: ReadonlySet<string> }): void {
      portalRoutes(router, { ...r, portal });
    },
    /** The portal's authentication (413, Origin, 401) for other modules serving its customers. */
    caller: (trustedOrigins: ReadonlySet<string>) => portalCaller(portal, trustedOrigins),
    start: () => portal.start(),
    stop: () => portal.stop(),
  };
}
