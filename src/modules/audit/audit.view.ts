// API shape of an audit-log entry, as the caller may see it.
import type { Principal } from '../access/index.js';
import { sightOf, visible } from '../access/index.js';
import type { AuditRow } from './audit.repository.js';

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
  });
}
