import { randomUUID } from 'node:crypto';
import type { Orm } from '../../platform/db/orm.js';
import { AccountSchema, DashboardSessionSchema, type Account } from '../../platform/db/entities/index.js';

export class SessionRepository {
  constructor(private readonly orm: Orm) {}

  async create(accountId: string, tokenHash: string, ip: string, now: Date, ttlMs: number): Promise<string> {
    const em = this.orm.em.fork();
    const id = randomUUID();
    em.create(DashboardSessionSchema, {
      id,
      accountId,
      tokenHash,
      ip: ip.slice(0, 64),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: new Date(now.getTime() + ttlMs),
    });
    await em.flush();
    return id;
  }

  /** The live session for a token hash and its account, or null. */
  async findLive(tokenHash: string, now: Date): Promise<{ sessionId: string; account: Account } | null> {
    const em = this.orm.em.fork();
    const s = await em.findOne(DashboardSessionSchema, { tokenHash, expiresAt: { $gt: now } });
    if (!s) return null;
    const account = await em.findOne(AccountSchema, { id: s.accountId });
    return account ? { sessionId: s.id, account } : null;
  }

  async delete(id: string): Promise<void> {
    await this.orm.em.fork().nativeDelete(DashboardSessionSchema, { id });
  }

  /** Revokes every session of an account (SPEC "Account": any change to role, enabled, apps, email or password). */
  async revokeAll(accountId: string, exceptSessionId?: string): Promise<number> {
    const where = exceptSessionId ? { accountId, id: { $ne: exceptSessionId } } : { accountId };
    return this.orm.em.fork().nativeDelete(DashboardSessionSchema, where);
  }
}
