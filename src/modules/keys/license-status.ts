// What a key's status is (docs/protocol.md 11.15 `computed_status`), written once as a TypeScript function
// and as the SQL predicates that filter and count listings; a test checks on generated keys that
// the two agree. A key is activated when it is `used`, or `pending` again after a use (a register
// reclaiming the key of a deleted user); it is expired when activated, not lifetime, and its expiry
// has passed. Activation itself refuses an expired key by the same rule (activation/license-policy).

export type ComputedStatus = 'active' | 'banned' | 'unactivated' | 'expired';

/** The columns the rule reads. */
interface StatusFacts {
  status: string;
  used_by: string;
  expires_at: Date | string | null;
  duration_days: number;
}

/** Expired: an expiry that has passed, on a key that is not lifetime (stored as duration_days 0). */
export function hasExpired(expiresAt: Date | string | null, lifetime: boolean, now: number): boolean {
  return expiresAt !== null && !lifetime && new Date(expiresAt).getTime() < now;
}

export function computedStatus(k: StatusFacts, now: number): ComputedStatus {
  if (k.status === 'banned') return 'banned';
  if (k.status === 'unused' || (k.status === 'pending' && k.used_by === '')) return 'unactivated';
  if (k.status !== 'used' && k.status !== 'pending') return 'unactivated';
  return hasExpired(k.expires_at, k.duration_days === 0, now) ? 'expired' : 'active';
}

const ACTIVATED = `(status = 'used' or (status = 'pending' and used_by <> ''))`;
const EXPIRED = `(expires_at is not null and duration_days <> 0 and expires_at < ?)`;

/**
 * The listing filters as SQL over license_keys: the stored statuses, and the computed ones (`?`:
 * now, for `active` and `expired`).
 */
export const STATUS_SQL = {
  unused: `status = 'unused'`,
  pending: `status = 'pending'`,
  used: `status = 'used'`,
  banned: `status = 'banned'`,
  unactivated: `not (status = 'banned' or ${ACTIVATED})`,
  active: `(${ACTIVATED} and not ${EXPIRED})`,
  expired: `(${ACTIVATED} and ${EXPIRED})`,
} as const;

export type StatusFilter = keyof typeof STATUS_SQL;
export const LICENSE_STATUS_FILTERS = Object.keys(STATUS_SQL) as StatusFilter[];

/** Whether a filter's predicate takes the time as its parameter. */
export function filterNeedsNow(f: StatusFilter): boolean {
  return f === 'active' || f === 'expired';
}
