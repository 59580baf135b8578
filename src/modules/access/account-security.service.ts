// The signed-in account's own security (the dashboard's Account > Security page): its sessions and
// "sign out everywhere", its second-factor state, and an owner's policy for its tree (docs/protocol.md 13.2).
import { AppError } from '../../errors.js';
import type { SessionRepository } from './session.repository.js';
import type { TwoFactorService } from './two-factor.service.js';
import { actorOf, type AuditWriter, type Principal } from './principal.js';
import { browserOf } from './user-agent.js';

interface AccountSecurityDeps {
  sessions: SessionRepository;
  twoFactor: TwoFactorService;
  now: () => number;
  audit?: AuditWriter;
  /** Live streams of ended sessions close on their next re-check. */
  access?: { changed(): void };
}

export class AccountSecurity {
  constructor(private readonly d: AccountSecurityDeps) {}

  async state(p: Principal) {
    const a = p.account;
    const sessions = await this.d.sessions.listLive(a.id, new Date(this.d.now()));
    return {
      two_factor: a.twoFactorSecret !== null,
      recovery_codes_left: a.twoFactorSecret ? await this.d.twoFactor.unusedRecoveryCodes(a.id) : 0,
      two_factor_required: a.ownerId !== a.id && (await this.d.twoFactor.ownerRequires(a.ownerId)),
      ...(a.role === 'owner' ? { require_two_factor: a.requireTwoFactor } : {}),
      sessions: sessions.map((s) => ({
        id: s.id,
        created_at: s.createdAt.toISOString(),
        last_seen_at: s.lastSeenAt.toISOString(),
        ip: s.ip,
        browser: browserOf(s.userAgent),
        current: s.id === p.sessionId,
      })),
    };
  }

  /** An owner's rule for its tree: every member signs in with a second factor (not the owner itself). */
  async setPolicy(p: Principal, require: boolean, ip: string): Promise<{ require_two_factor: boolean }> {
    if (p.account.role !== 'owner') throw new AppError('permission_denied');
    await this.d.twoFactor.setPolicy(p.account.id, require);
    this.d.audit?.write({
      appId: null,
      action: 'account.security',
      detail: require ? 'Two-factor sign-in required of every member' : 'Two-factor sign-in no longer required',
      ip,
      actor: actorOf(p),
    });
    this.d.access?.changed();
    return { require_two_factor: require };
  }

  /** Signs out every other session of the caller ("sign out everywhere"). */
  async revokeOthers(p: Principal, ip: string): Promise<number> {
    const revoked = await this.d.sessions.revokeAll(p.account.id, p.sessionId);
    this.d.audit?.write({
      appId: null,
      action: 'auth.sessions_revoked',
      detail: `${revoked} other sessions signed out`,
      ip,
      actor: actorOf(p),
    });
    this.d.access?.changed();
    return revoked;
  }

  /** Ends one of the caller's sessions. */
  async revoke(p: Principal, sessionId: string, ip: string): Promise<void> {
    if (!(await this.d.sessions.deleteOwn(p.account.id, sessionId))) throw new AppError('session_not_found');
    this.d.audit?.write({
      appId: null,
      action: 'auth.session_revoked',
      detail: 'A session signed out',
      ip,
      actor: actorOf(p),
    });
    this.d.access?.changed();
  }
}
