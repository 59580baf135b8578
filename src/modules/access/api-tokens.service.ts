// API tokens for automation (docs/protocol.md 13.1). A token is `kwt_` + 32 random bytes (base64url), shown
// once at creation and stored only as HMAC-SHA256 under a server key, so a database dump reveals no
// usable token and a lookup by hash leaks nothing through timing. A call with one acts as its
// account as the account is at that moment (the caller, auth.service.ts, loads it fresh and builds
// the principal), narrowed to the token's scopes and app_ids; each token has its own rate limit.
import { AppError, rateLimited, validationError } from '../../errors.js';
import { hmacSha256, randomToken } from '../../platform/crypto/index.js';
import type { ApiToken } from '../../platform/db/entities/index.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { addressLimiter, type RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import { consumeOrThrow } from '../../platform/limits/lockout.js';
import type { ApiTokenRepository } from './api-token.repository.js';
import { actorOf, type AuditWriter, type Principal, type TokenGrant } from './principal.js';
import type { TokenScope } from './token-scopes.js';
import { tokensPolicy } from './policies.js';

export const TOKEN_PREFIX = 'kwt_';
const TOKEN_FORMAT = /^kwt_[A-Za-z0-9_-]{43}$/;
/** Calls a minute per token (docs/protocol.md 13.1). */
const CALLS_PER_MINUTE = 600;
const MAX_TOKENS_PER_ACCOUNT = 100;
/** A token's last use is written at most this often (and whenever its address changes). */
const TOUCH_GAP_MS = 60_000;

interface ApiTokensDeps {
  repo: ApiTokenRepository;
  /** HMAC key of stored tokens (Secrets.apiTokenKey). */
  key: Buffer;
  coordinator: Pick<Coordinator, 'kind' | 'limiter'>;
  now: () => number;
  /** Ids of the applications a principal reaches now (app_ids must be among them). */
  reachableApps: (p: Principal) => Promise<readonly string[]>;
  /** Whether an account is inside an owner's tree (an owner revokes its members' tokens). */
  ownerOf: (accountId: string) => Promise<string | null>;
  audit?: AuditWriter;
  /** Live streams a revoked token opened are closed by their next re-check. */
  access?: { changed(): void };
}

interface NewTokenInput {
  name: string;
  scopes: TokenScope[];
  app_ids?: string[] | null | undefined;
  expires_at?: string | null | undefined;
}

function tokenView(t: ApiToken) {
  return {
    id: t.id,
    name: t.name,
    scopes: t.scopes,
    app_ids: t.appIds,
    expires_at: t.expiresAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    last_used_at: t.lastUsedAt?.toISOString() ?? null,
    last_used_ip: t.lastUsedIp || null,
  };
}

export class ApiTokens {
  private readonly limiter: RequestLimiter;

  constructor(private readonly d: ApiTokensDeps) {
    this.limiter = addressLimiter(d.coordinator, d.now, 'token', CALLS_PER_MINUTE);
  }

  private hash(token: string): string {
    return hmacSha256(this.d.key, token).toString('hex');
  }

  async create(p: Principal, input: NewTokenInput, ip: string) {
    const now = new Date(this.d.now());
    let expiresAt: Date | null = null;
    if (input.expires_at != null) {
      expiresAt = new Date(input.expires_at);
      if (!/^\d{4}-\d\d-\d\d/.test(input.expires_at) || Number.isNaN(expiresAt.getTime()))
        throw validationError('expires_at', 'expires_at must be an ISO 8601 time or null', 'date_parsing');
      if (expiresAt <= now) throw validationError('expires_at', 'expires_at must be in the future');
    }
    let appIds: string[] | null = null;
    if (input.app_ids != null) {
      const reachable = new Set(await this.d.reachableApps(p));
      appIds = [...new Set(input.app_ids.map((id) => id.toLowerCase()))];
      const outside = input.app_ids.findIndex((id) => !reachable.has(id.toLowerCase()));
      if (outside >= 0) throw validationError(['app_ids', outside], 'Not an application you can reach');
    }
    if ((await this.d.repo.count(p.account.id)) >= MAX_TOKENS_PER_ACCOUNT)
      throw validationError('name', `An account holds at most ${MAX_TOKENS_PER_ACCOUNT} tokens; revoke one first`);
    const token = TOKEN_PREFIX + randomToken(32);
    const scopes = [...new Set(input.scopes)];
    const row = await this.d.repo.create(
      { accountId: p.account.id, name: input.name, tokenHash: this.hash(token), scopes, appIds, expiresAt },
      now,
    );
    this.d.audit?.write({
      appId: null,
      action: 'token.create',
      detail:
        `Token "${input.name}" (${row.id}) created: ${scopes.join(', ')}; ` +
        `${appIds ? `${appIds.length} applications` : 'every application'}; ` +
        `${expiresAt ? `expires ${expiresAt.toISOString()}` : 'no expiry'}`,
      ip,
      actor: actorOf(p),
    });
    const { last_used_at: _used, last_used_ip: _ip, ...view } = tokenView(row);
    return { ...view, token };
  }

  async list(p: Principal) {
    return (await this.d.repo.list(p.account.id)).map(tokenView);
  }

  /** Who may revoke which token: tokensPolicy. */
  async revoke(p: Principal, id: string, ip: string): Promise<void> {
    const t = await this.d.repo.findById(id);
    const mayRevoke = t !== null && (await tokensPolicy.mayRevoke(p, t.accountId, this.d.ownerOf));
    if (!t || !mayRevoke) throw new AppError('token_not_found');
    await this.d.repo.delete(t.id);
    this.d.audit?.write({
      appId: null,
      action: 'token.revoke',
      detail: `Token "${t.name}" (${t.id}) revoked`,
      ip,
      actor: actorOf(p),
    });
    this.d.access?.changed();
  }

  /**
   * The account id and grant of a live token, or null when it is unknown, malformed or expired;
   * 429 past the token's rate limit. Whether the account may still act is the caller's check.
   * `recheck` (a live stream checking its access again) neither counts nor records a use.
   */
  async authenticate(
    token: string,
    ip: string,
    recheck = false,
  ): Promise<{ accountId: string; grant: TokenGrant; expiresAt: Date | null } | null> {
    if (!TOKEN_FORMAT.test(token)) return null;
    const t = await this.d.repo.findByHash(this.hash(token));
    const now = new Date(this.d.now());
    if (!t || (t.expiresAt !== null && t.expiresAt <= now)) return null;
    if (!recheck) {
      await consumeOrThrow(this.limiter, t.id, rateLimited);
      this.d.repo.touch(t.id, ip, now, TOUCH_GAP_MS).catch(() => undefined); // a lost "last used" costs nothing
    }
    return {
      accountId: t.accountId,
      grant: { id: t.id, scopes: t.scopes as TokenScope[], appIds: t.appIds },
      expiresAt: t.expiresAt,
    };
  }
}
