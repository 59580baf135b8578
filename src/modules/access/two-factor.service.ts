// Two-factor sign-in (docs/protocol.md 13.2): TOTP secrets sealed at rest (secretbox under the two-factor
// key), ten recovery codes stored as keyed hashes, and every code accepted once: a TOTP step is
// claimed by a conditional UPDATE (no step at or before the last accepted one passes again) and a
// recovery code is marked used the same way. Which sessions end and what is audited is the
// caller's (auth.service.ts); nothing here logs a code or a secret.
import { AppError } from '../../errors.js';
import { hkdfSha256, hmacSha256, randomBytes, secretboxOpen, secretboxSeal } from '../../platform/crypto/index.js';
import type { Account } from '../../platform/db/entities/index.js';
import type { TwoFactorRepository } from './two-factor.repository.js';
import { base32Decode, matchTotp, newTotpSecret, otpauthUrl } from './totp.js';

const RECOVERY_CODES = 10;
const RECOVERY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** HKDF label of the recovery codes' hash key; the two-factor key itself only seals secrets. */
const RECOVERY_KEY_INFO = 'keywarden recovery code v1';

interface TwoFactorDeps {
  repo: TwoFactorRepository;
  /** 32-byte secretbox key (Secrets.twoFactorKey). */
  key: Buffer;
  now: () => number;
}

/** A recovery code as issued: 5+5 of [a-z0-9] joined by "-" (uniform: bytes past 251 are redrawn). */
function recoveryCode(): string {
  let out = '';
  while (out.length < 10) {
    for (const b of randomBytes(16)) {
      if (b >= 252 || out.length === 10) continue;
      out += RECOVERY_ALPHABET[b % 36];
    }
  }
  return `${out.slice(0, 5)}-${out.slice(5)}`;
}

export class TwoFactorService {
  private readonly codeKey: Buffer;

  constructor(private readonly d: TwoFactorDeps) {
    this.codeKey = hkdfSha256(d.key, RECOVERY_KEY_INFO, 32);
  }

  isOn(account: Account): boolean {
    return account.twoFactorSecret !== null;
  }

  private seal(secret: string): string {
    return secretboxSeal(Buffer.from(secret, 'utf8'), this.d.key).toString('base64');
  }

  /** The secret's bytes; null when the stored value does not open (altered, or another key). */
  private open(sealed: string): Buffer | null {
    const plain = secretboxOpen(Buffer.from(sealed, 'base64'), this.d.key);
    return plain ? base32Decode(plain.toString('utf8')) : null;
  }

  private recoveryHash(normalized: string): string {
    return hmacSha256(this.codeKey, normalized).toString('hex');
  }

  /** A new pending secret (replacing any earlier one) and the URL an authenticator app scans. */
  async setup(account: Account): Promise<{ secret: string; otpauth_url: string }> {
    if (this.isOn(account)) throw new AppError('two_factor_already_on');
    const secret = newTotpSecret();
    await this.d.repo.setPending(account.id, this.seal(secret));
    return { secret, otpauth_url: otpauthUrl(account.username, secret) };
  }

  /** Confirms the pending secret with a code from it; returns the recovery codes (shown only now). */
  async enable(account: Account, code: string): Promise<string[]> {
    if (this.isOn(account)) throw new AppError('two_factor_already_on');
    const pending = account.twoFactorPending;
    const secret = pending ? this.open(pending) : null;
    if (!pending || !secret) throw new AppError('two_factor_not_set_up');
    const step = matchTotp(secret, code.trim(), this.d.now());
    if (step === null) throw new AppError('two_factor_code_invalid');
    const codes = Array.from({ length: RECOVERY_CODES }, recoveryCode);
    const hashes = codes.map((c) => this.recoveryHash(c.replace('-', '')));
    // A setup (or an enable) that raced this one replaced the pending secret: this code proved nothing.
    if (!(await this.d.repo.enable(account.id, pending, step, hashes))) throw new AppError('two_factor_not_set_up');
    return codes;
  }

  /**
   * Whether `otp` is a code the account has not used: a current TOTP code (6 digits) or an unused
   * recovery code (with or without its hyphen, any case). Either is spent by this call.
   */
  async verify(account: Account, otp: string): Promise<boolean> {
    if (!account.twoFactorSecret) return false;
    const code = otp.trim();
    if (/^\d{6}$/.test(code)) {
      const secret = this.open(account.twoFactorSecret);
      const step = secret ? matchTotp(secret, code, this.d.now()) : null;
      return step !== null && this.d.repo.claimStep(account.id, step);
    }
    const normalized = code.toLowerCase().replace(/[\s-]/g, '');
    if (!/^[a-z0-9]{10}$/.test(normalized)) return false;
    return this.d.repo.useRecoveryCode(account.id, this.recoveryHash(normalized), new Date(this.d.now()));
  }

  /** Turns two-factor off for an account (its own disable, or its owner's reset). */
  clear(accountId: string): Promise<boolean> {
    return this.d.repo.clear(accountId);
  }

  unusedRecoveryCodes(accountId: string): Promise<number> {
    return this.d.repo.unusedRecoveryCodes(accountId);
  }

  ownerRequires(ownerId: string): Promise<boolean> {
    return this.d.repo.ownerRequires(ownerId);
  }

  setPolicy(ownerId: string, require: boolean): Promise<void> {
    return this.d.repo.setPolicy(ownerId, require);
  }
}
