// The audit log as the dashboard reads it, newest first: an application's log, scoped to the
// caller's subtree for admins and resellers (docs/protocol.md 11.9), and the account audit of who did what
// outside applications (docs/protocol.md 13.3): an owner sees its tree, an admin its subtree, a reseller
// its own entries, a developer everything. Hidden fields are removed by the views.
import type { AuditRepository, AuditRow } from './audit.repository.js';
import { ValidationError } from '../../errors.js';
import {
  auditPolicy,
  requirePermission,
  resellerScope,
  type AccountRepository,
  type Principal,
} from '../access/index.js';

interface AuditLogDeps {
  audit: AuditRepository;
  accounts: AccountRepository;
  /** The apps module's check that the caller sees an application (404 otherwise): a port compose.ts fills. */
  apps: { visible(p: Principal, appId: string): Promise<unknown> };
}

/** An application log's filters (GET /api/apps/{id}/logs). */
interface LogsFilter {
  level?: string;
  action?: string;
  actor?: string;
  q?: string;
  from?: string;
  to?: string;
  limit?: number;
  before?: string;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** An ISO date or time from the query string; anything else is 422 on that parameter. */
function isoQuery(name: string, v: string | undefined): Date | undefined {
  if (v === undefined) return undefined;
  const ms = ISO_TIME.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms))
    throw new ValidationError([
      { loc: ['query', name], msg: `${name} must be an ISO date or time (2026-11-25T10:00:00Z)`, type: 'value_error' },
    ]);
  return new Date(ms);
}

/** Sign-ins shown on the Security page. */
const SIGN_INS = 20;

export class AuditLog {
  constructor(private readonly d: AuditLogDeps) {}

  async logs(p: Principal, appId: string, q: LogsFilter): Promise<AuditRow[]> {
    requirePermission(p, 'view_auth_logs');
    await this.d.apps.visible(p, appId);
    // Deleted members that were in the caller's subtree stay in scope (docs/protocol.md 11.32).
    const scoped = (await resellerScope(this.d.accounts, p)) !== undefined;
    const resellerIds = scoped ? await this.d.accounts.auditScopeIds(p.account.id) : undefined;
    // Hiding is applied by the view (access/visibility.ts): hidden fields are absent (docs/protocol.md 11.17).
    return this.d.audit.list({
      appId,
      level: q.level,
      action: q.action,
      actor: q.actor,
      q: q.q,
      from: isoQuery('from', q.from),
      to: isoQuery('to', q.to),
      limit: q.limit ?? 100,
      before: q.before,
      resellerIds,
    });
  }

  /** Every entry the listing with these filters reaches, a page at a time (the CSV export). */
  async *logPages(p: Principal, appId: string, q: Omit<LogsFilter, 'limit' | 'before'>): AsyncGenerator<AuditRow[]> {
    const limit = 1000;
    let before: string | undefined;
    for (;;) {
      const rows = await this.logs(p, appId, { ...q, limit, before });
      yield rows;
      if (rows.length < limit) return;
      before = rows[rows.length - 1]!.id;
    }
  }

  /** Whose account-level entries the caller sees; undefined: everyone's. */
  private async actorsOf(p: Principal): Promise<readonly string[] | undefined> {
    const actors = auditPolicy.actors(p);
    if (actors === 'all') return undefined;
    if (actors === 'self') return [p.account.id];
    return this.d.accounts.auditScopeIds(p.account.id);
  }

  async account(
    p: Principal,
    q: { action?: string; actor?: string; limit?: number; before?: string },
  ): Promise<AuditRow[]> {
    return this.d.audit.listAccount({
      actorIds: await this.actorsOf(p),
      action: q.action,
      actor: q.actor,
      limit: q.limit ?? 100,
      before: q.before,
    });
  }

  /** The caller's own recent sign-ins, failed ones included. */
  signIns(p: Principal): Promise<AuditRow[]> {
    return this.d.audit.listAccount({
      actorIds: [p.account.id],
      actions: ['auth.login', 'auth.login_failed'],
      limit: SIGN_INS,
    });
  }
}
