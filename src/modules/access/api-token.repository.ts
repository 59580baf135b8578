// API tokens as stored: the keyed hash, never the token (docs/protocol.md 13.1).
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../platform/db/orm.js';
import { ApiTokenSchema, type ApiToken } from '../../platform/db/entities/index.js';

interface NewToken {
  accountId: string;
  name: string;
  tokenHash: string;
  scopes: string[];
  appIds: string[] | null;
  expiresAt: Date | null;
}

export class ApiTokenRepository {
  constructor(private readonly orm: Orm) {}

  async create(input: NewToken, now: Date): Promise<ApiToken> {
    const em = this.orm.em.fork();
    const token = em.create(ApiTokenSchema, {
      id: randomUUID(),
      ...input,
      createdAt: now,
      lastUsedAt: null,
      lastUsedIp: '',
    });
    await em.flush();
    return token;
  }

  count(accountId: string): Promise<number> {
    return this.orm.em.fork().count(ApiTokenSchema, { accountId });
  }

  /** An account's tokens, newest first. */
  list(accountId: string): Promise<ApiToken[]> {
    return this.orm.em.fork().find(ApiTokenSchema, { accountId }, { orderBy: { createdAt: 'desc', id: 'desc' } });
  }

  findByHash(tokenHash: string): Promise<ApiToken | null> {
    return this.orm.em.fork().findOne(ApiTokenSchema, { tokenHash });
  }

  findById(id: string): Promise<ApiToken | null> {
    return this.orm.em.fork().findOne(ApiTokenSchema, { id });
  }

  async delete(id: string): Promise<boolean> {
    return (await this.orm.em.fork().nativeDelete(ApiTokenSchema, { id })) > 0;
  }

  /**
   * Records a use: written when the address changed or the last write is older than `gapMs`, so a
   * busy automation costs a write a minute, not one a call.
   */
  async touch(id: string, ip: string, now: Date, gapMs: number): Promise<void> {
    const address = ip.slice(0, 64);
    await this.orm.em.fork().nativeUpdate(
      ApiTokenSchema,
      {
        id,
        $or: [
          { lastUsedAt: null },
          { lastUsedAt: { $lt: new Date(now.getTime() - gapMs) } },
          { lastUsedIp: { $ne: address } },
        ],
      },
      { lastUsedAt: now, lastUsedIp: address },
    );
  }
}
