import { randomUUID } from 'node:crypto';
import type { Orm } from '../../platform/db/orm.js';
import {
  AccountSchema,
  DashboardSessionSchema,
  type Account,
  type DashboardSession,
} from '../../platform/db/entities/index.js';

interface NewSession {
  accountId: string;
  tokenHash: string;
  ip: string;
  userAgent: string;
}

export class SessionRepository {
  constructor(private readonly orm: Orm) {}

  async create(s: NewSession, now: Date, ttlMs: number): Promise<string> {
    const em = this.orm.em.fork();
    const id = randomUUID();
    em.create(DashboardSessionSchema, {
      id,
      accountId: s.accountId,
      tokenHash: s.tokenHash,
      ip: s.ip.slice(0, 64),
      userAgent: s.userAgent.slice(0, 256),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: new Date(now.getTime() + ttlMs),
    });
    await em.flush();
    return id;
  }

  /** The live session for a token hash and its account, or null. */
  async findLive(
    tokenHash: string,
    now: Date,
  ): Promise<{ sessionId: string; lastSeenAt: Date; expiresAt: Date; account: Account } | null> {
    const em = this.orm.em.fork();
    const s = await em.findOne(DashboardSessionSchema, { tokenHash, expiresAt: { $gt: now } });
    if (!s) return null;
    const account = await em.findOne(AccountSchema, { id: s.accountId });
    return account ? { sessionId: s.id, lastSeenAt: s.lastSeenAt, expiresAt: s.expiresAt, account } : null;
  }

  /** Records activity (the Security page's "last seen"); callers write it at most once a minute. */
  async touch(id: string, now: Date): Promise<void> {
    await this.orm.em.fork().nativeUpdate(DashboardSessionSchema, { id }, { lastSeenAt: now });
  }

  /** An account's live sessions, most recently used first. */
  listLive(accountId: string, now: Date): Promise<DashboardSession[]> {
    return this.orm.em
      .fork()
      .find(
        DashboardSessionSchema,
        { accountId, expiresAt: { $gt: now } },
        { orderBy: { lastSeenAt: 'desc', id: 'desc' } },
      );
  }

  async delete(id: string): Promise<void> {
    await this.orm.em.fork().nativeDelete(DashboardSessionSchema, { id });
  }

  /** Ends one session of an account; false when it has none of that id. */
  async deleteOwn(accountId: string, id: string): Promise<boolean> {
    return (await this.orm.em.fork().nativeDelete(DashboardSessionSchema, { id, accountId })) > 0;
  }

  /**
   * Revokes every session of an account (docs/spec.md "Account": any change to role, enabled, apps, email or password).
   */
  async revokeAll(accountId: string, exceptSessionId?: string | null): Promise<number> {
    const where = exceptSessionId ? { accountId, id: { $ne: exceptSessionId } } : { accountId };
    return this.orm.em.fork().nativeDelete(DashboardSessionSchema, where);
  }
}
