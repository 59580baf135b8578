// Whose records a caller sees (docs/protocol.md 11.9): owners and developers every record of their
// applications; an admin or a reseller the records of its own subtree (itself and every account
// below it). Listings, live streams and the audit log all scope with this.
import type { AccountRepository } from './account.repository.js';
import type { Principal } from './principal.js';

/** The account ids whose records the caller may see, or undefined when it sees them all. */
export async function resellerScope(
  accounts: Pick<AccountRepository, 'subtreeIds'>,
  p: Principal,
): Promise<string[] | undefined> {
  return p.role === 'admin' || p.role === 'reseller' ? accounts.subtreeIds(p.account.id) : undefined;
}
