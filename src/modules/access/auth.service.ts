// Dashboard sign-in (docs/protocol.md 7, 13): opaque bearer tokens (stored as SHA-256), HttpOnly cookie,
// username lockout after 5 failures in 15 minutes, two-factor codes at sign-in, API tokens for
// automation, owner and developer bootstrap. Every sign-in, failed sign-in, sign-out and change of
// the second factor is audited with its actor; passwords, codes, secrets and tokens never are.
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
import { Attempt, attempt, Lockout } from '../../platform/limits/lockout.js';
import { actorOf, effectiveRole, type AuditWriter, type Principal, type TokenGrant } from './principal.js';
import { assertPasswordPolicy } from './password-policy.js';
import type { AccessSignal } from './access-signal.js';
import { ApiTokens, TOKEN_PREFIX } from './api-tokens.service.js';
import type { ApiTokenRepository } from './api-token.repository.js';
import { TwoFactorService } from './two-factor.service.js';
import type { TwoFactorRepository } from './two-factor.repository.js';
import { assertTokenAllows, assertTokenApp } from './token-scopes.js';
import { assertReachable, namedRecord, type RecordReach } from './cross-owner.js';

export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000;
export const SESSION_COOKIE = 'kw_session';
const USERNAME = /^[a-zA-Z0-9_-]{3,32}$/;
/** Failed sign-ins from one IP within 15 minutes, whatever the usernames, that lock the IP for 15 minutes. */
const IP_FAILURES = 20;
/** A session's "last seen" is written at most this often. */
const SEEN_GAP_MS = 60_000;

/** What dashboard sign-in uses, and nothing more (one composition root: compose.ts; cli.ts uses it too). */
export interface DashboardAuthDeps {
  repos: {
    accounts: AccountRepository;
    sessions: SessionRepository;
    apiTokens: ApiTokenRepository;
    twoFactor: TwoFactorRepository;
  };
  secrets: { twoFactorKey: Buffer; apiTokenKey: Buffer };
  coordinator: Coordinator;
  developerEmails: readonly string[];
  /** Origins besides a request's own Host that the web dashboard is served from (PUBLIC_URL). */
  trustedOrigins: readonly string[];
  log: Logger;
  now: () => number;
  /** Ids of the applications a principal reaches now (an API token's app_ids must be among them). */
  reachableApps: (p: Principal) => Promise<readonly string[]>;
  /** Whether the principal's account (not narrowed by a token) reaches an application (docs/protocol.md 11.36). */
  reachesApp: (p: Principal, appId: string) => Promise<boolean>;
  /** The application a key, end user, blacklist entry or product belongs to; null when there is none. */
  recordApp: RecordReach['appOf'];
  /** Account-level audit entries (sign-ins, second factor, tokens). */
  audit?: AuditWriter;
  /** Live streams re-check their subscribers after a sign-out or a password change. */
  access?: Pick<AccessSignal, 'changed'>;
}

/** Where a dashboard call comes from (the audit's address and browser). */
export interface CallerOrigin {
  ip: string;
  userAgent?: string | undefined;
}

export class DashboardAuth {
  private readonly lockout: Lockout;
  /** Password spraying: many usernames from one address. Counted apart from the per-username lock. */
  private readonly ipLockout: Lockout;

  /** Lower-cased origins (scheme://host[:port]) a cookie-authenticated write may come from, besides its Host. */
  readonly trustedOrigins: ReadonlySet<string>;
  readonly twoFactor: TwoFactorService;
  readonly tokens: ApiTokens;

  constructor(private readonly d: DashboardAuthDeps) {
    this.trustedOrigins = new Set(d.trustedOrigins.map((o) => new URL(o).origin.toLowerCase()));
    this.lockout = new Lockout(d.coordinator, { name: 'dashboard', failures: 5, windowSeconds: 900, lockSeconds: 900 });
    this.ipLockout = new Lockout(d.coordinator, {
      name: 'dashboard-ip',
      failures: IP_FAILURES,
      windowSeconds: 900,
      lockSeconds: 900,
    });
    this.twoFactor = new TwoFactorService({ repo: d.repos.twoFactor, key: d.secrets.twoFactorKey, now: d.now });
    this.tokens = new ApiTokens({
      repo: d.repos.apiTokens,
      key: d.secrets.apiTokenKey,
      coordinator: d.coordinator,
      now: d.now,
      reachableApps: d.reachableApps,
      ownerOf: async (id) => (await d.repos.accounts.findById(id))?.ownerId ?? null,
      ...(d.audit ? { audit: d.audit } : {}),
      ...(d.access ? { access: d.access } : {}),
    });
  }

  private now(): Date {
    return new Date(this.d.now());
  }

  private record(
    action: string,
    who: Principal | Account,
    from: CallerOrigin,
    detail: string,
    level: 'info' | 'warning' = 'info',
  ): void {
    const actor =
      'account' in who
        ? actorOf(who)
        : { id: who.id, username: who.username, role: effectiveRole(who, this.d.developerEmails) };
    this.d.audit?.write({
      appId: null,
      action,
      detail,
      level,
      ip: from.ip,
      actor,
      ...(from.userAgent ? { userAgent: from.userAgent.slice(0, 256) } : {}),
    });
  }

  /**
   * The principal of an account that may act now: enabled, its subscription (or its admin's) not
   * lapsed (docs/protocol.md 11.30), and marked when its owner requires a second factor it lacks.
   */
  private async principalOf(
    account: Account,
    sessionId: string | null,
    ip: string | undefined,
    token?: TokenGrant,
    expiresAt?: Date | null,
  ): Promise<Principal> {
    const role = effectiveRole(account, this.d.developerEmails);
    if (
      (role === 'admin' || role === 'reseller') &&
      (await this.d.repos.accounts.subscriptionLapsed(account.id, this.now()))
    )
      throw new AppError('subscription_expired');
    const twoFactorMissing =
      account.ownerId !== account.id &&
      account.twoFactorSecret === null &&
      (await this.twoFactor.ownerRequires(account.ownerId));
    return {
      account,
      role,
      sessionId,
      ...(ip ? { ip } : {}),
      ...(token ? { token } : {}),
      ...(expiresAt ? { expiresAt: expiresAt.getTime() } : {}),
      ...(twoFactorMissing ? { twoFactorMissing } : {}),
    };
  }

  async login(
    input: { username: string; password: string; otp?: string | undefined },
    from: CallerOrigin,
  ): Promise<{ token: string; principal: Principal }> {
    const key = input.username.toLowerCase();
    // docs/protocol.md 11.31: the attempt is reserved against the name and the address before it is checked.
    return attempt(
      [
        [this.lockout, [key]],
        [this.ipLockout, [from.ip]],
      ],
      (a) => this.signIn(input, from, key, a),
    );
  }

  private async signIn(
    input: { username: string; password: string; otp?: string | undefined },
    from: CallerOrigin,
    key: string,
    attempt: Attempt,
  ): Promise<{ token: string; principal: Principal }> {
    const account = await this.d.repos.accounts.findByUsername(input.username);
    // Unknown names cost the same Argon2id work as a wrong password, so names don't leak.
    const ok = account
      ? await verifyPassword(account.passwordHash, input.password)
      : await burnPasswordCheck(input.password);
    if (!account || !ok || !account.enabled) {
      attempt.fail();
      this.d.log.info({ username: key, ip: from.ip }, 'dashboard.login_failed');
      if (account) this.record('auth.login_failed', account, from, 'Wrong password', 'warning');
      throw new AppError('invalid_credentials');
    }
    let method = 'password';
    if (this.twoFactor.isOn(account)) {
      // The password was right: asking for the code is not a failed attempt (docs/protocol.md 13.2).
      if (!input.otp?.trim()) throw new AppError('two_factor_code_required');
      if (!(await this.twoFactor.verify(account, input.otp))) {
        attempt.fail();
        this.d.log.info({ username: key, ip: from.ip }, 'dashboard.login_failed');
        this.record('auth.login_failed', account, from, 'Wrong two-factor code', 'warning');
        throw new AppError('two_factor_login_invalid');
      }
      method = /^\s*\d{6}\s*$/.test(input.otp) ? 'password and two-factor code' : 'password and recovery code';
    }
    // A sign-in token never looks like an API token (one in 16.7 million would, by chance).
    let token = randomToken(32);
    while (token.startsWith(TOKEN_PREFIX)) token = randomToken(32);
    const sessionId = await this.d.repos.sessions.create(
      { accountId: account.id, tokenHash: sha256Hex(token), ip: from.ip, userAgent: from.userAgent ?? '' },
      this.now(),
      SESSION_TTL_MS,
    );
    const principal = await this.principalOf(account, sessionId, from.ip);
    this.record('auth.login', principal, from, `Signed in with ${method}`);
    return { token, principal };
  }

  /**
   * The principal of a sign-in token or an API token (`kwt_`), or null when it is unknown, expired
   * or its account disabled or gone. `recheck`: a live stream checking again (an API token's use is
   * neither counted against its rate limit nor recorded).
   */
  async authenticate(token: string, opts: { ip?: string; recheck?: boolean } = {}): Promise<Principal | null> {
    if (token.startsWith(TOKEN_PREFIX)) return this.authenticateApiToken(token, opts);
    if (token.length < 20 || token.length > 128) return null;
    const now = this.now();
    const found = await this.d.repos.sessions.findLive(sha256Hex(token), now);
    if (!found || !found.account.enabled) return null;
    if (!opts.recheck && now.getTime() - found.lastSeenAt.getTime() > SEEN_GAP_MS)
      this.d.repos.sessions.touch(found.sessionId, now).catch(() => undefined); // a lost "last seen" costs nothing
    return this.principalOf(found.account, found.sessionId, opts.ip, undefined, found.expiresAt);
  }

  private async authenticateApiToken(token: string, opts: { ip?: string; recheck?: boolean }) {
    const found = await this.tokens.authenticate(token, opts.ip ?? '', opts.recheck === true);
    if (!found) throw new AppError('token_invalid');
    const account = await this.d.repos.accounts.findById(found.accountId);
    if (!account?.enabled) throw new AppError('token_invalid');
    return this.principalOf(account, null, opts.ip, found.grant, found.expiresAt);
  }

  /**
   * The first check after authentication (docs/protocol.md 11.36): a path naming an application, or a record
   * inside one, the caller's account does not reach answers that record's 404, before `admit` or a
   * handler could answer 403; one of an app outside an API token's app_ids then answers 403.
   */
  async reach(p: Principal, path: string): Promise<void> {
    const named = namedRecord(path);
    if (!named) return;
    const appId = await assertReachable(named, {
      appOf: this.d.recordApp,
      reaches: (id) => this.d.reachesApp(p, id),
    });
    // A record of this tree in an app outside a token's app_ids: 403 (docs/protocol.md 13.1), before its body is read.
    assertTokenApp(p, appId);
  }

  /**
   * What every authenticated dashboard call passes after authentication and `reach`: an API token
   * only within its scopes and app_ids; a member whose owner requires a second factor it lacks only to
   * /api/auth/* (where it sets one up).
   */
  admit(p: Principal, method: string, path: string): void {
    assertTokenAllows(p, method, path);
    if (p.twoFactorMissing && !/^\/api\/auth(\/|$)/.test(path)) throw new AppError('two_factor_required');
  }

  async logout(p: Principal, from: CallerOrigin): Promise<void> {
    if (p.sessionId) await this.d.repos.sessions.delete(p.sessionId);
    this.record('auth.logout', p, from, 'Signed out');
    this.d.access?.changed();
  }

  /** Own password change: other sessions are revoked, this one stays signed in. */
  async changePassword(p: Principal, current: string, next: string, from: CallerOrigin): Promise<void> {
    if (!(await verifyPassword(p.account.passwordHash, current))) throw new AppError('current_password_wrong');
    assertPasswordPolicy(next, p.account.username);
    await this.d.repos.accounts.setPassword(p.account.id, await hashPassword(next), this.now());
    await this.d.repos.sessions.revokeAll(p.account.id, p.sessionId);
    this.record('auth.password', p, from, 'Password changed; other sessions signed out');
    this.d.access?.changed();
  }

  /** A new pending second factor (its secret is in the answer only). */
  async setupTwoFactor(p: Principal, from: CallerOrigin): Promise<{ secret: string; otpauth_url: string }> {
    const pending = await this.twoFactor.setup(p.account);
    this.record('auth.2fa.setup', p, from, 'Two-factor setup started');
    return pending;
  }

  /** Confirms the pending second factor; the account's other sessions end (docs/protocol.md 13.2). */
  async enableTwoFactor(p: Principal, code: string, from: CallerOrigin): Promise<string[]> {
    const codes = await this.twoFactor.enable(p.account, code);
    await this.d.repos.sessions.revokeAll(p.account.id, p.sessionId);
    this.record('auth.2fa.enabled', p, from, 'Two-factor sign-in enabled; other sessions signed out');
    this.d.access?.changed();
    return codes;
  }

  /**
   * Turns the second factor off with the password and a code (or a recovery code). Wrong answers
   * count towards the sign-in lockout of the account's name, so codes cannot be guessed here either.
   */
  async disableTwoFactor(p: Principal, password: string, code: string, from: CallerOrigin): Promise<void> {
    const key = p.account.username.toLowerCase();
    await this.lockout.attempt([key], (a) => this.checkSecondFactor(p, password, code, from, a));
    await this.twoFactor.clear(p.account.id);
    await this.d.repos.sessions.revokeAll(p.account.id, p.sessionId);
    this.record('auth.2fa.disabled', p, from, 'Two-factor sign-in disabled; other sessions signed out', 'warning');
    this.d.access?.changed();
  }

  /** The password and code that turn two-factor off, as one reserved attempt of the name's lockout. */
  private async checkSecondFactor(p: Principal, password: string, code: string, from: CallerOrigin, attempt: Attempt) {
    if (!this.twoFactor.isOn(p.account)) throw new AppError('two_factor_off');
    if (!(await verifyPassword(p.account.passwordHash, password))) {
      attempt.fail();
      throw new AppError('current_password_wrong');
    }
    if (!(await this.twoFactor.verify(p.account, code))) {
      attempt.fail();
      this.record('auth.2fa.failed', p, from, 'Wrong two-factor code while turning two-factor off', 'warning');
      throw new AppError('two_factor_code_invalid');
    }
  }

  /** Creates the owner `username` unless an account of that name exists; returns whether it created one. */
  async ensureOwner(username: string, password: string): Promise<boolean> {
    return this.ensureTopAccount(username, password, null);
  }

  /** docs/protocol.md 11.16: a developer is a stored top-level account whose email is a reserved developer address. */
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
    two_factor: a.twoFactorSecret !== null,
    created_at: a.createdAt.toISOString(),
  };
}
