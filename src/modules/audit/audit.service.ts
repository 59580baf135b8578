// An application's audit log as the dashboard reads it: newest first, scoped to the caller's
// subtree for admins and resellers (PROTOCOL 11.9), hidden fields removed by the view.
import type { AuditRepository, AuditRow } from './audit.repository.js';
import { requirePermission, resellerScope, type AccountRepository, type Principal } from '../access/index.js';
import type { AppsService } from '../apps/index.js';

interface AuditLogDeps {
  audit: AuditRepository;
  accounts: AccountRepository;
  apps: Pick<AppsService, 'visible'>;
}

export class AuditLog {
  constructor(private readonly d: AuditLogDeps) {}

  async logs(
    p: Principal,
    appId: string,
    q: { level?: string; action?: string; limit?: number; before?: string },
  ): Promise<AuditRow[]> {
    requirePermission(p, 'view_auth_logs');
    await this.d.apps.visible(p, appId);
    const resellerIds = await resellerScope(this.d.accounts, p);
    // Hiding is applied by the view (access/visibility.ts): hidden fields are absent (PROTOCOL 11.17).
    return this.d.audit.list({
      appId,
      level: q.level,
      action: q.action,
      limit: q.limit ?? 100,
      before: q.before,
      resellerIds,
    });
  }
}
