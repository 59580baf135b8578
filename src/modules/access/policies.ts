// Who may do what on the dashboard, one policy per resource (docs/spec.md "Permission set", "Reseller scoping
// and hiding"; docs/architecture.md "Module map"). Services and routes ask these and never compare roles
// themselves (eslint.config.js refuses a comparison with a role name outside modules/access), so a
// rule changes in one place. A check named assert* throws `permission_denied`; the rest answer.
import type { Account, StoredRole } from '../../platform/db/entities/index.js';
import { AppError } from '../../errors.js';
import { requirePermission, requireRole, type Principal } from './principal.js';

/** Owners, admins and developers: everyone who manages rather than sells. */
function assertManager(p: Principal): void {
  requireRole(p, 'owner', 'admin', 'developer');
}

/** A developer reaches every owner's tree; everyone else only its own owner's. */
function crossesOwners(p: Principal): boolean {
  return p.role === 'developer';
}

/** Owners and developers: the top of a tree (admins and resellers work under them). */
function isTop(p: Principal): boolean {
  return p.role === 'owner' || p.role === 'developer';
}

/** Admins and resellers: staff whose records are their own subtree's (docs/protocol.md 11.9). */
function isStaff(p: Principal): boolean {
  return p.role === 'admin' || p.role === 'reseller';
}

/** Applications: who reaches which, who changes them, who sees their secret and statistics. */
export const appsPolicy = {
  /** docs/protocol.md 11.9: every app (developer), the account's own (owner), the apps it was given (others). */
  reach(p: Principal): 'all' | 'own' | 'allowed' {
    return crossesOwners(p) ? 'all' : p.role === 'owner' ? 'own' : 'allowed';
  },
  /** Create apps, change settings, the blacklist, SDK downloads: not resellers (docs/spec.md). */
  assertManage(p: Principal): void {
    if (p.role === 'reseller') throw new AppError('permission_denied');
  },
  /** Notices to live clients: owners, admins, developers. */
  assertNotice: assertManager,
  /** The owner of an app the caller creates, and whether the creator is given it (an admin sees only its own). */
  created(p: Principal): { ownerId: string; allowCreator: boolean } {
    return p.role === 'admin'
      ? { ownerId: p.account.ownerId, allowCreator: true }
      : { ownerId: p.account.id, allowCreator: false };
  },
  /** docs/spec.md: the api_secret is hidden from resellers. */
  seesSecret(p: Principal): boolean {
    return p.role !== 'reseller';
  },
  /** The app cards' counts: all records, the caller's scoped ones (a reseller with view_stats), or none. */
  stats(p: Principal): 'all' | 'scoped' | 'none' {
    if (p.role !== 'reseller') return 'all';
    return p.account.permissions?.view_stats === true ? 'scoped' : 'none';
  },
};

/** License keys: edits, time, imports, and whom generated keys are attributed to and charged. */
export const keysPolicy = {
  /** Level, note, devices, entitlements, offline files: a reseller needs generate_keys. */
  assertEdit(p: Principal): void {
    if (p.role === 'reseller') requirePermission(p, 'generate_keys');
  },
  /** Extend or subtract time, one key or all: owners, admins, developers. */
  assertChangeTime: assertManager,
  /** Import keys from a list: owners, admins, developers. */
  assertImport: assertManager,
  /** Seat pools for an air-gapped network's relay, like time: owners, admins, developers. */
  assertPool: assertManager,
  /** The reseller_id of keys the caller creates: its own account for admins and resellers, else none. */
  attributedTo(p: Principal): string | null {
    return isStaff(p) ? p.account.id : null;
  },
  /** Resellers pay for the keys they generate with credits (docs/protocol.md 11.7). */
  paysCredits(p: Principal): boolean {
    return p.role === 'reseller';
  },
};

/** Products of the shop: owners, admins, developers. */
export const productsPolicy = { assertManage: assertManager };

/** Releases and their artifacts (docs/releases.md): resellers may list them, managers change them. */
export const releasesPolicy = { assertManage: assertManager };

/** The audit log's account-level entries. */
export const auditPolicy = {
  /** Whose entries the caller sees: everyone's (developer), its own (reseller), its audit scope (others). */
  actors(p: Principal): 'all' | 'self' | 'scope' {
    return crossesOwners(p) ? 'all' : p.role === 'reseller' ? 'self' : 'scope';
  },
};

/** API tokens (docs/protocol.md 13.1). */
export const tokensPolicy = {
  /** The caller's own token; an owner also any token of its tree, a developer any token. */
  async mayRevoke(p: Principal, holder: string, ownerOf: (accountId: string) => Promise<string | null>) {
    if (holder === p.account.id || crossesOwners(p)) return true;
    return p.role === 'owner' && (await ownerOf(holder)) === p.account.id;
  },
};

/** Team members (docs/spec.md "Dashboard: team" rules). */
export const teamPolicy = {
  /** Members the caller manages: none (reseller), every account (developer), its subtree (others). */
  members(p: Principal): 'none' | 'all' | 'subtree' {
    return p.role === 'reseller' ? 'none' : crossesOwners(p) ? 'all' : 'subtree';
  },
  /** The trees whose apps the caller may name: every one (developer) or its owner's. */
  crossesOwners,
  /**
   * The target of a team operation, in the fixed order of checks: unknown or in another owner's
   * tree -> 404 (invisible); self -> 403 self-edit; an owner -> 403 owner protection; outside the
   * caller's subtree -> 403 scope.
   */
  async target(p: Principal, a: Account | null, inSubtree: (a: Account) => Promise<boolean>): Promise<Account> {
    if (!a || (!crossesOwners(p) && a.ownerId !== p.account.ownerId)) throw new AppError('account_not_found');
    if (a.id === p.account.id) throw new AppError('self_edit');
    if (a.role === 'owner') throw new AppError('owner_protected');
    if (p.role === 'reseller') throw new AppError('permission_denied');
    if (!crossesOwners(p) && !(await inSubtree(a))) throw new AppError('permission_denied');
    return a;
  },
  /** Create a member of `role`: not resellers; admins create only resellers. */
  assertCreate(p: Principal, role: StoredRole): void {
    if (p.role === 'reseller') throw new AppError('permission_denied');
    if (role === 'admin' && !isTop(p)) throw new AppError('permission_denied');
  },
  /**
   * docs/spec.md "Dashboard: team" rule 7 (role, enabled flag, apps) and rule 6 (password): an admin is the top's to
   * change.
   */
  assertManageMember(p: Principal, target: Account): void {
    if (target.role === 'admin' && !isTop(p)) throw new AppError('permission_denied');
  },
  /** Rule 7: only the top promotes or demotes admins; subscriptions are the top's too. */
  assertTop(p: Principal): void {
    if (!isTop(p)) throw new AppError('permission_denied');
  },
  /** Key quota, notes and permissions belong to resellers; credits too. */
  sells(role: StoredRole): boolean {
    return role === 'reseller';
  },
  /** Subscriptions are admins'; an admin's lost apps are taken from the resellers below it. */
  isAdmin(role: StoredRole): boolean {
    return role === 'admin';
  },
  /** A global webhook of one's own: not resellers (they own no app). */
  assertOwnWebhook(p: Principal): void {
    if (p.role === 'reseller') throw new AppError('resellers_no_apps');
  },
};
