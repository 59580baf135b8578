// The audit module's public surface: the audit log.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Sql } from '../../platform/db/sql.js';
import type { Metrics } from '../../platform/http/metrics.js';
import type { Router } from '../../platform/http/router.js';
import type { AccountRepository, DashboardAuth } from '../access/index.js';
import { AuditRepository } from './audit.repository.js';
import { auditRoutes } from './audit.routes.js';
import { AuditLog } from './audit.service.js';

export type { AuditRepository };

interface AuditDeps {
  sql: Sql;
  log: Logger;
  now: () => number;
  /** An entry's Location column from its IP (the geo module's lookup), filled in at flush. */
  locate: (ip: string) => Promise<string>;
}

/** What the dashboard's log pages need besides the log: built when the routes are mounted. */
interface AuditRouteDeps {
  auth: DashboardAuth;
  accounts: AccountRepository;
  apps: ConstructorParameters<typeof AuditLog>[0]['apps'];
}

/**
 * Builds the audit module. The writer exists before every other module (each one writes to it);
 * the dashboard's reading side is built with the routes.
 */
export function createAudit(d: AuditDeps) {
  const repository = new AuditRepository(d.sql, d.log, d.now, d.locate);
  return {
    repository,
    /** The write queue at scrape time (it waits out a database outage). */
    gauges(metrics: Pick<Metrics, 'gauge'>): void {
      const g = (name: string, help: string, read: () => number) => metrics.gauge(name, help, read);
      g(
        'keywarden_audit_queued',
        'Audit entries waiting to be written (they wait out a database outage)',
        () => repository.queued,
      );
      g(
        'keywarden_audit_dropped_total',
        'Audit entries dropped because the queue overflowed during a database outage',
        () => repository.dropped,
      );
    },
    mount(router: Router, r: AuditRouteDeps): void {
      auditRoutes(router, {
        auth: r.auth,
        log: new AuditLog({ audit: repository, accounts: r.accounts, apps: r.apps }),
      });
    },
  };
}

export type AuditModule = ReturnType<typeof createAudit>;
