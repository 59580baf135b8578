// The team tree (docs/spec.md "Dashboard: team", rules 1-8; docs/protocol.md 7, 11.7, 11.8, 11.11).
// Checks run in a fixed order: self-edit, then owner protection, then scope, then the rule of
// the operation. Any change to role, enabled, apps, email or password revokes the target's sessions.
import { AppError, ValidationError, validationError } from '../../errors.js';
import { hashPassword, randomToken } from '../../platform/crypto/index.js';
import { noPermissions, type Account, type Permissions, type StoredRole } from '../../platform/db/entities/index.js';
import { MAX_CREDITS, type TeamRepository } from './team.repository.js';
import type { Logger } from 'pino';
import type { AccountRepository, SessionRepository, Principal, AccessSignal } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { ApplicationRepository } from '../apps/index.js';
import { scopeOf } from '../apps/index.js';
import { actorOf, assertPasswordPolicy, effectiveRole, teamPolicy } from '../access/index.js';
import { assertWebhookUrl, type EventBus } from '../notify/index.js';
import type { TeamCreate } from './team.requests.js';

const DAY_MS = 86_400_000;

type SubscriptionChange = { clear?: true; extend_days?: number; expires_at?: string };

/** What the team service uses, and nothing more (one composition root: compose.ts). */
interface TeamServiceDeps {
  repos: {
    accounts: AccountRepository;
    apps: ApplicationRepository;
    audit: AuditRepository;
    sessions: SessionRepository;
  };
  allowPrivateWebhooks: boolean;
  developerEmails: readonly string[];
  log: Logger;
  now: () => number;
  /** Live streams re-check their subscribers after every team change. */
  access?: Pick<AccessSignal, 'changed'>;
  /** An owner clears a member's second factor (docs/protocol.md 13.2). */
  twoFactor: { clear(accountId: string): Promise<boolean> };
  /** A reseller's balance change reaches its open dashboards (`account.credits`). */
  events?: Pick<EventBus, 'publishAccount'>;
}

export class TeamService {
  constructor(
    private readonly d: TeamServiceDeps,
    private readonly team: TeamRepository,
  ) {}

  private now(): Date {
    return new Date(this.d.now());
  }

  view(a: Account) {
    const role = effectiveRole(a, this.d.developerEmails);
    return {
      id: a.id,
      username: a.username,
      display_name: a.displayName,
      email: a.email,
      role,
      parent_id: a.parentId,
      owner_id: a.ownerId,
      enabled: a.enabled,
      allowed_apps: a.allowedApps,
      key_quota: a.keyQuota,
      credits: a.keyQuota,
      notes: a.notes,
      permissions: a.permissions,
      subscription_expires_at: a.subscriptionExpiresAt?.toISOString() ?? null,
      webhook: a.webhook,
      two_factor: a.twoFactorSecret !== null,
      created_at: a.createdAt.toISOString(),
    };
  }

  /** Members the caller manages: everyone for a developer, the subtree for owners and admins, none for resellers. */
  async members(p: Principal): Promise<Account[]> {
    const members = teamPolicy.members(p);
    if (members === 'none') return [];
    if (members === 'all') return (await this.team.all()).filter((a) => a.id !== p.account.id);
    return this.team.descendants(p.account.id);
  }

  /** The target of a team operation, in teamPolicy.target's order of checks. */
  private async target(p: Principal, id: string): Promise<Account> {
    return teamPolicy.target(p, await this.d.repos.accounts.findById(id), async (a) =>
      (await this.team.descendants(p.account.id)).some((d) => d.id === a.id),
    );
  }

  private async normalizeEmail(email: string, exceptId?: string): Promise<string | null> {
    const e = email.trim().toLowerCase();
    if (e === '') return null;
    if (this.d.developerEmails.includes(e)) throw new AppError('email_reserved');
    const other = await this.team.findByEmail(e);
    if (other && other.id !== exceptId) throw new AppError('email_taken');
    return e;
  }

  /** docs/spec.md "Dashboard: team" rule 8: only apps the caller owns or is assigned can be given out. */
  private async assertAssignable(p: Principal, appIds: readonly string[]): Promise<string[]> {
    const unique = [...new Set(appIds)];
    const visible = new Set((await this.d.repos.apps.list(scopeOf(p))).map((a) => a.id));
    const outside = unique.filter((id) => !visible.has(id));
    if (outside.length === 0) return unique;
    // docs/protocol.md 11.36: an app outside the caller's tree does not exist for it (404); one of its own
    // tree it was not given is refused (403).
    const tree = teamPolicy.crossesOwners(p)
      ? ({ kind: 'all' } as const)
      : ({ kind: 'owner', ownerId: p.account.ownerId } as const);
    for (const id of outside)
      if (!(await this.d.repos.apps.findInScope(tree, id.toLowerCase()))) throw new AppError('app_not_found');
    throw new AppError('permission_denied');
  }

  async create(p: Principal, b: TeamCreate): Promise<Account> {
    const role: StoredRole = b.role ?? 'reseller';
    teamPolicy.assertCreate(p, role);
    assertPasswordPolicy(b.password, b.username);
    if (await this.d.repos.accounts.findByUsername(b.username)) throw new AppError('account_username_taken');
    const email = b.email !== undefined ? await this.normalizeEmail(b.email) : null;
    const allowedApps = await this.assertAssignable(p, b.allowed_apps ?? []);
    const now = this.now();
    const created = await this.d.repos.accounts.create(
      {
        username: b.username,
        displayName: b.display_name ?? b.username,
        passwordHash: await hashPassword(b.password),
        role,
        parentId: p.account.id,
        ownerId: p.account.ownerId,
        email,
        webhookSecret: randomToken(32),
      },
      now,
    );
    const account = await this.team.update(created.id, {
      allowedApps,
      // docs/protocol.md 11.7: a reseller created with key_quota 0 (or none) is unlimited.
      keyQuota: teamPolicy.sells(role) && b.key_quota ? b.key_quota : null,
      notes: teamPolicy.sells(role) ? (b.notes ?? '') : '',
      permissions: teamPolicy.sells(role) ? { ...noPermissions(), ...b.permissions } : noPermissions(),
    });
    this.audit(p, `team.create`, `${role} ${b.username} created`);
    return account;
  }

  async update(
    p: Principal,
    id: string,
    b: { role?: 'admin' | 'reseller'; enabled?: boolean; email?: string },
  ): Promise<Account> {
    const t = await this.target(p, id);
    const patch: Partial<Account> = { updatedAt: this.now() };
    if (b.role !== undefined && b.role !== t.role) {
      // rule 7: only the owner promotes (or demotes) admins
      teamPolicy.assertTop(p);
      patch.role = b.role;
      if (teamPolicy.isAdmin(b.role)) patch.permissions = noPermissions();
    }
    if (b.enabled !== undefined) {
      teamPolicy.assertManageMember(p, t);
      patch.enabled = b.enabled;
    }
    if (b.email !== undefined) patch.email = await this.normalizeEmail(b.email, t.id);
    const account = await this.team.update(t.id, patch);
    await this.d.repos.sessions.revokeAll(t.id);
    this.audit(p, 'team.update', `${t.username} changed: ${Object.keys(b).join(', ')}`);
    return account;
  }

  async remove(p: Principal, id: string): Promise<number> {
    const t = await this.target(p, id);
    teamPolicy.assertManageMember(p, t);
    // Sessions go with the row (ON DELETE CASCADE); children move under the caller.
    const adopted = await this.team.deleteAndAdopt(t.id, p.account.id);
    this.audit(p, 'team.delete', `${t.username} deleted; ${adopted} members adopted`);
    return adopted;
  }

  /** docs/protocol.md 11.8: any subset of the eleven keys; omitted keys become false. */
  async setPermissions(p: Principal, id: string, permissions: Partial<Permissions>): Promise<Account> {
    const t = await this.target(p, id);
    const account = await this.team.update(t.id, {
      permissions: { ...noPermissions(), ...permissions },
      updatedAt: this.now(),
    });
    this.audit(p, 'team.permissions', `${t.username} permissions replaced`);
    return account;
  }

  async setApps(p: Principal, id: string, appIds: string[]): Promise<Account> {
    const t = await this.target(p, id);
    teamPolicy.assertManageMember(p, t);
    const wanted = await this.assertAssignable(p, appIds);
    const removed = t.allowedApps.filter((x) => !wanted.includes(x));
    const account = await this.team.update(t.id, { allowedApps: wanted, updatedAt: this.now() });
    await this.d.repos.sessions.revokeAll(t.id);
    if (teamPolicy.isAdmin(t.role) && removed.length > 0) {
      // Cascade: resellers under the admin lose the apps the admin lost.
      const below = await this.team.descendants(t.id);
      await this.team.removeApps(
        below.map((d) => d.id),
        removed,
        this.now(),
      );
      for (const d of below)
        if (d.allowedApps.some((x) => removed.includes(x))) await this.d.repos.sessions.revokeAll(d.id);
    }
    this.audit(p, 'team.apps', `${t.username} apps set to ${wanted.length}`);
    return account;
  }

  async addCredits(p: Principal, id: string, amount: number): Promise<Account> {
    const t = await this.target(p, id);
    if (!teamPolicy.sells(t.role)) throw new AppError('credits_resellers_only');
    if (!(await this.team.addCredits(t.id, amount, this.now())))
      throw validationError('amount', `The balance cannot exceed ${MAX_CREDITS.toLocaleString('en-US')} credits`);
    this.audit(p, 'team.credits', `${amount >= 0 ? '+' : ''}${amount} credits for ${t.username}`);
    const account = (await this.d.repos.accounts.findById(t.id))!;
    await this.d.events?.publishAccount('account.credits', t.id, { credits: account.keyQuota, change: amount });
    return account;
  }

  async setSubscription(p: Principal, id: string, b: SubscriptionChange): Promise<Account> {
    teamPolicy.assertTop(p);
    const t = await this.target(p, id);
    if (!teamPolicy.isAdmin(t.role)) throw new AppError('subscription_admins_only');
    const given = (['clear', 'extend_days', 'expires_at'] as const).filter((k) => b[k] !== undefined);
    if (given.length !== 1)
      throw new ValidationError([
        { loc: ['body'], msg: 'Send exactly one of clear, extend_days, expires_at', type: 'value_error' },
      ]);
    let expires: Date | null;
    const now = this.now();
    if (b.clear) expires = null;
    else if (b.extend_days !== undefined) {
      // Rule 2: an expired (or unlimited) subscription is extended from now.
      const from = t.subscriptionExpiresAt && t.subscriptionExpiresAt > now ? t.subscriptionExpiresAt : now;
      expires = new Date(from.getTime() + b.extend_days * DAY_MS);
    } else {
      const day = /^\d{4}-\d{2}-\d{2}/.exec(b.expires_at!)?.[0];
      const d = day ? new Date(`${day}T23:59:59.999Z`) : new Date(NaN);
      if (Number.isNaN(d.getTime()))
        throw validationError('expires_at', 'expires_at must be a date (YYYY-MM-DD)', 'date_parsing');
      expires = d; // rule 2: the end of that day, UTC
    }
    const account = await this.team.update(t.id, { subscriptionExpiresAt: expires, updatedAt: now });
    this.audit(
      p,
      'team.subscription',
      `${t.username} subscription ${expires ? `until ${expires.toISOString()}` : 'unlimited'}`,
    );
    return account;
  }

  async setPassword(p: Principal, id: string, password: string): Promise<void> {
    const t = await this.target(p, id);
    // Rule 6: only the owner resets an admin's password.
    teamPolicy.assertManageMember(p, t);
    assertPasswordPolicy(password, t.username);
    await this.d.repos.accounts.setPassword(t.id, await hashPassword(password), this.now());
    await this.d.repos.sessions.revokeAll(t.id);
    this.audit(p, 'team.password', `${t.username} password reset`);
  }

  async setOwnWebhook(p: Principal, webhook: string): Promise<Account> {
    teamPolicy.assertOwnWebhook(p);
    if (webhook !== '') await assertWebhookUrl(webhook, this.d.allowPrivateWebhooks);
    const account = await this.team.update(p.account.id, { webhook, updatedAt: this.now() });
    this.audit(p, 'account.webhook', webhook ? 'Global webhook set' : 'Global webhook cleared');
    return account;
  }

  async setMemberWebhook(p: Principal, id: string, webhook: string): Promise<Account> {
    const t = await this.target(p, id);
    if (webhook !== '') await assertWebhookUrl(webhook, this.d.allowPrivateWebhooks);
    const account = await this.team.update(t.id, { webhook, updatedAt: this.now() });
    this.audit(p, 'team.webhook', `${t.username} webhook ${webhook ? 'set' : 'cleared'}`);
    return account;
  }

  /** The owner clears a member's second factor (a lost phone); the member's sessions end. */
  async resetTwoFactor(p: Principal, id: string): Promise<void> {
    teamPolicy.assertTop(p);
    const t = await this.target(p, id);
    const wasOn = await this.d.twoFactor.clear(t.id);
    await this.d.repos.sessions.revokeAll(t.id);
    this.audit(p, 'team.2fa_reset', `${t.username} two-factor sign-in ${wasOn ? 'reset' : 'was not set up'}`);
  }

  /**
   * Team changes belong to no application: audited with app_id null and logged. Every one of them
   * may narrow someone's access, so live streams are told to re-check.
   */
  private audit(p: Principal, action: string, detail: string): void {
    this.d.repos.audit.write({ appId: null, action, detail, actor: actorOf(p) });
    this.d.log.info({ by: p.account.id, action }, detail);
    this.d.access?.changed();
  }
}
