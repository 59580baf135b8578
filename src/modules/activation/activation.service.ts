// The client runtime contract: init, register, login, license, trial, offline (docs/spec.md endpoints and
// error tables, docs/protocol.md 2). One file per use case (account, license, trial, offline); this class is
// what routes and other modules call.
import type {
  ClientCall,
  ClientOutcome,
  InitRequest,
  LicenseRequest,
  LoginRequest,
  OfflineRequest,
  RegisterRequest,
  TrialRequest,
  ClientAppRow,
} from '../client/index.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { Lockout } from '../../platform/limits/lockout.js';
import { graceField } from '../keys/index.js';
import { AccountCalls } from './account.service.js';
import type { ActivationDeps } from './activation-calls.js';
import { LicenseCalls } from './license.service.js';
import { OfflineFiles } from './offline.service.js';
import { TrialCalls } from './trial.service.js';

/**
 * The client lockouts (docs/protocol.md 2): one instance per worker, shared by every sign-in that guesses
 * the same names and keys (client login and register, the customer portal).
 */
export function clientLockout(coordinator: Coordinator): Lockout {
  return new Lockout(coordinator, { name: 'client', failures: 10, windowSeconds: 900, lockSeconds: 900 });
}

export class ActivationService {
  private readonly accounts: AccountCalls;
  private readonly licenses: LicenseCalls;
  private readonly trials: TrialCalls;
  private readonly files: OfflineFiles;

  constructor(private readonly d: ActivationDeps) {
    this.accounts = new AccountCalls(d, d.lockout ?? clientLockout(d.coordinator));
    this.licenses = new LicenseCalls(d);
    this.trials = new TrialCalls(d);
    this.files = new OfflineFiles(d);
  }

  /** Answered synchronously when the session needs no stored response key (no enc_key). */
  init(call: ClientCall<InitRequest>): ClientOutcome | Promise<ClientOutcome> {
    return this.accounts.init(call);
  }

  register(call: ClientCall<RegisterRequest>): Promise<ClientOutcome> {
    return this.accounts.register(call);
  }

  login(call: ClientCall<LoginRequest>): Promise<ClientOutcome> {
    return this.accounts.login(call);
  }

  license(call: ClientCall<LicenseRequest>): Promise<ClientOutcome> {
    return this.licenses.license(call);
  }

  trial(call: ClientCall<TrialRequest>): Promise<ClientOutcome> {
    return this.trials.trial(call);
  }

  offline(call: ClientCall<OfflineRequest>): Promise<ClientOutcome> {
    return this.files.offline(call);
  }

  offlineFileFor(...a: Parameters<OfflineFiles['offlineFileFor']>): ReturnType<OfflineFiles['offlineFileFor']> {
    return this.files.offlineFileFor(...a);
  }

  offlineForKey(...a: Parameters<OfflineFiles['offlineForKey']>): ReturnType<OfflineFiles['offlineForKey']> {
    return this.files.offlineForKey(...a);
  }

  /**
   * What update offers and downloads need of a session's license (docs/releases.md): gone, banned
   * (the key, or the end user holding it), or its expiry (null: never) and entitlements.
   */
  async licenseStanding(holder: {
    licenseId: string;
    userId: string | null;
  }): Promise<
    | { state: 'deleted' | 'banned' }
    | { state: 'ok'; expiresAt: Date | null; entitlements: string[]; resellerId: string | null }
  > {
    const key = await this.d.licenseOps.load(holder.licenseId);
    if (!key) return { state: 'deleted' };
    const user = holder.userId ? await this.d.users.grantOf(holder.userId) : undefined;
    if (key.status === 'banned' || (holder.userId && (!user || user.banned))) return { state: 'banned' };
    const lifetime = !user && key.durationUnit === 'lifetime';
    return {
      state: 'ok',
      expiresAt: lifetime ? null : user ? user.expiresAt : key.expiresAt,
      entitlements: [...key.entitlements],
      resellerId: key.resellerId,
    };
  }

  offlineActivation(
    ...a: Parameters<OfflineFiles['offlineActivation']>
  ): ReturnType<OfflineFiles['offlineActivation']> {
    return this.files.offlineActivation(...a);
  }

  /** docs/protocol.md 12.6 for heartbeat answers: the grace of the session's license, or nothing. */
  async graceForSession(
    app: Pick<ClientAppRow, 'grace_hours'>,
    s: { userId: string | null; licenseId: string | null },
  ): Promise<{ grace_until?: string }> {
    if (app.grace_hours <= 0) return {};
    const expiresAt = s.userId
      ? ((await this.d.users.grantOf(s.userId))?.expiresAt ?? null)
      : s.licenseId
        ? await this.d.licenseOps.expiryOf(s.licenseId)
        : null;
    return graceField(app.grace_hours, expiresAt, this.d.now());
  }
}
