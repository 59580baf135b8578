// API shape of an audit-log entry, as the caller may see it.
import type { Principal } from '../access/index.js';
import { browserOf, sightOf, visible } from '../access/index.js';
import type { AuditRow } from './audit.repository.js';

/** Who did it (docs/protocol.md 13.3): the account as it was then, and the API token it used; null for client calls. */
function actorView(r: AuditRow) {
  if (!r.actor_id) return null;
  return {
    id: r.actor_id,
    username: r.actor_username,
    role: r.actor_role,
    ...(r.token_id ? { token_id: r.token_id } : {}),
    ...(r.actor_deleted ? { deleted: true } : {}),
  };
}

/** A log entry as the caller may see it (access/visibility.ts: one rule for every channel). */
export function logView(r: AuditRow, p: Principal) {
  return visible(sightOf(p), {
    id: r.id,
    time: new Date(r.at).toISOString(),
    level: r.level,
    action: r.action,
    detail: r.detail,
    ip: r.ip,
    location: r.location,
    screen: r.screen,
    actor_id: r.actor_id,
    actor: actorView(r),
  });
}

/** An account-level entry (GET /api/audit): no application, no screen. */
export function accountEntryView(r: AuditRow, p: Principal) {
  return visible(sightOf(p), {
    id: r.id,
    time: new Date(r.at).toISOString(),
    level: r.level,
    action: r.action,
    detail: r.detail,
    ip: r.ip,
    location: r.location,
    actor: actorView(r),
    ...(r.user_agent !== null ? { browser: browserOf(r.user_agent) } : {}),
  });
}

/** One sign-in on the Security page: when, from where, which browser, and whether it succeeded. */
export function signInView(r: AuditRow) {
  return {
    id: r.id,
    time: new Date(r.at).toISOString(),
    success: r.action === 'auth.login',
    detail: r.detail,
    ip: r.ip,
    location: r.location,
    browser: browserOf(r.user_agent),
  };
}
