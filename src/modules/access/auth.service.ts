// Dashboard sign-in (PROTOCOL 7): opaque bearer tokens (stored as SHA-256), HttpOnly cookie,
// username lockout after 5 failures in 15 minutes, owner and developer bootstrap.
import { AppError, validationError } from '../../errors.js';
import {
  burnPasswordCheck,
  hashPassword,
  randomToken,
  sha256Hex,
  verifyPassword,
} from '../../platform/crypto/index.js';
import type { Account } from '../../platform/db/entities/index.js';
import type { Logger } from 'pino';
import type { AccountRepository } from './account.repository.js';
import type { SessionRepository } from './session.repository.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { ConfigError } from '../../config.js';
import { Lockout } from '../../platform/limits/lockout.js';
import { effectiveRole, type Principal } from './principal.js';
import { assertPasswordPolicy } from './password-policy.js';
import type { AccessSignal } from './access-signal.js';

export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000;
export const SESSION_COOKIE = 'kw_session';
const USERNAME = /^[a-zA-Z0-9_-]{3,32}$/;
/** Failed sign-ins from one IP within 15 minutes, whatever the usernames, that lock the IP for 15 minutes. */
const IP_FAILURES = 20;

/** What dashboard sign-in uses, and nothing more (one composition root: compose.ts; cli.ts uses it too). */
export interface DashboardAuthDeps {
  repos: { accounts: AccountRepository; sessions: SessionRepository };
  coordinator: Coordinator;
  developerEmails: readonly string[];
  /** Origins besides a request's own Host that the web dashboard is served from (PUBLIC_URL). */
  trustedOrigins: readonly string[];
  log: Logger;
  now: () => number;
  /** Live streams re-check their subscribers after a sign-out or a password change. */
  access?: Pick<AccessSignal, 'changed'>;
}

export class DashboardAuth {
  private readonly lockout: Lockout;
  /** Password spraying: many usernames from one address. Counted apart from the per-username lock. */
  private readonly ipLockout: Lockout;

  /** Lower-cased origins (scheme://host[:port]) a cookie-authenticated write may come from, besides its Host. */
  readonly trustedOrigins: ReadonlySet<string>;

  constructor(private readonly d: DashboardAuthDeps) {
    this.trustedOrigins = new Set(d.trustedOrigins.map((o) => new URL(o).origin.toLowerCase()));
    this.lockout = new Lockout(d.coordinator, { name: 'dashboard', failures: 5, windowSeconds: 900, lockSeconds: 900 });
    this.ipLockout = new Lockout(d.coordinator, {
      name: 'dashboard-ip',
      failures: IP_FAILURES,
      windowSeconds: 900,
      lockSeconds: 900,
    });
  }

  private now(): Date {
    return new Date(this.d.now());
  }

  principalOf(account: Account, sessionId: string): Principal {
    return { account, sessionId, role: effectiveRole(account, this.d.developerEmails) };
  }

  async login(username: string, password: string, ip: string): Promise<{ token: string; principal: Principal }> {
    const key = username.toLowerCase();
    await Promise.all([this.lockout.check([key]), this.ipLockout.check([ip])]);
    const account = await this.d.repos.accounts.findByUsername(username);
    // Unknown names cost the same Argon2id work as a wrong password, so names don't leak.
    const ok = account ? await verifyPassword(account.passwordHash, password) : await burnPasswordCheck(password);
    if (!account || !ok || !account.enabled) {
      await Promise.all([this.lockout.fail([key]), this.ipLockout.fail([ip])]);
      this.d.log.info({ username: key, ip }, 'dashboard.login_failed');
      throw new AppError('invalid_credentials');
    }
    const token = randomToken(32);
    const sessionId = await this.d.repos.sessions.create(account.id, sha256Hex(token), ip, this.now(), SESSION_TTL_MS);
    return { token, principal: this.principalOf(account, sessionId) };
  }

  /** The principal for a bearer token or cookie value, or null when unknown, expired or disabled. */
  async authenticate(token: string): Promise<Principal | null> {
    if (token.length < 20 || token.length > 128) return null;
    const found = await this.d.repos.sessions.findLive(sha256Hex(token), this.now());
    if (!found || !found.account.enabled) return null;
    const a = found.account;
    const principal = this.principalOf(a, found.sessionId);
    // An admin's subscription binds its whole subtree: its resellers stop with it (PROTOCOL 11.30).
    if (
      (principal.role === 'admin' || principal.role === 'reseller') &&
      (await this.d.repos.accounts.subscriptionLapsed(a.id, this.now()))
    )
      throw new AppError('subscription_expired');
    return principal;
  }

  async logout(p: Principal): Promise<void> {
    await this.d.repos.sessions.delete(p.sessionId);
    this.d.access?.changed();
  }

  /** Own password change: other sessions are revoked, this one stays signed in. */
  async changePassword(p: Principal, current: string, next: string): Promise<void> {
    if (!(await verifyPassword(p.account.passwordHash, current))) throw new AppError('current_password_wrong');
    assertPasswordPolicy(next, p.account.username);
    await this.d.repos.accounts.setPassword(p.account.id, await hashPassword(next), this.now());
    await this.d.repos.sessions.revokeAll(p.account.id, p.sessionId);
    this.d.access?.changed();
  }

  /** Creates the owner `username` unless an account of that name exists; returns whether it created one. */
  async ensureOwner(username: string, password: string): Promise<boolean> {
    return this.ensureTopAccount(username, password, null);
  }

  /** PROTOCOL 11.16: a developer is a stored top-level account whose email is a reserved developer address. */
  async ensureDeveloper(username: string, password: string): Promise<boolean> {
    const email = this.d.developerEmails[0];
    if (!email) throw new ConfigError('DEVELOPER_EMAILS must name at least one address to create a developer account');
    return this.ensureTopAccount(username, password, email);
  }

  private async ensureTopAccount(username: string, password: string, email: string | null): Promise<boolean> {
    if (!USERNAME.test(username))
      throw validationError('username', 'Username must be 3-32 characters of a-z, A-Z, 0-9, _ or -');
    assertPasswordPolicy(password, username);
    if (await this.d.repos.accounts.findByUsername(username)) return false;
    try {
      await this.d.repos.accounts.create(
        {
          username,
          passwordHash: await hashPassword(password),
          role: 'owner',
          parentId: null,
          email,
          webhookSecret: randomToken(32),
        },
        this.now(),
      );
    } catch (err) {
      // Workers starting together race to bootstrap the same account: the loser finds it made.
      if ((err as Error).name === 'UniqueConstraintViolationException') return false;
      throw err;
    }
    return true;
  }
}

export function accountView(p: Principal | { account: Account; role: string }) {
  const a = p.account;
  return {
    id: a.id,
    username: a.username,
    display_name: a.displayName,
    email: a.email,
    role: p.role,
    parent_id: a.parentId,
    owner_id: a.ownerId,
    enabled: a.enabled,
    allowed_apps: a.allowedApps,
    key_quota: a.keyQuota,
    credits: a.keyQuota,
    notes: a.notes,
    permissions: a.permissions,
    subscription_expires_at: a.subscriptionExpiresAt ? a.subscriptionExpiresAt.toISOString() : null,
    webhook: a.webhook,
    created_at: a.createdAt.toISOString(),
  };
}
