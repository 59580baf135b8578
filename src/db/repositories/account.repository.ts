import { randomUUID } from 'node:crypto';
import type { Orm } from '../orm.js';
import { AccountSchema, noPermissions, type Account, type StoredRole } from '../entities/index.js';

export interface NewAccount {
  username: string;
  passwordHash: string;
  role: StoredRole;
  parentId: string | null;
  ownerId?: string;
  email?: string | null;
  displayName?: string;
  webhookSecret: string;
}

export class AccountRepository {
  constructor(private readonly orm: Orm) {}

  findByUsername(username: string): Promise<Account | null> {
    return this.orm.em.fork().findOne(AccountSchema, { username });
  }

  findById(id: string): Promise<Account | null> {
    return this.orm.em.fork().findOne(AccountSchema, { id });
  }

  async create(input: NewAccount, now: Date): Promise<Account> {
    const em = this.orm.em.fork();
    const id = randomUUID();
    const account = em.create(AccountSchema, {
      id,
      username: input.username,
      displayName: input.displayName ?? input.username,
      email: input.email ?? null,
      role: input.role,
      parentId: input.parentId,
      ownerId: input.ownerId ?? id,
      enabled: true,
      allowedApps: [],
      keyQuota: null,
      notes: '',
      permissions: noPermissions(),
      subscriptionExpiresAt: null,
      passwordHash: input.passwordHash,
      webhook: '',
      webhookSecret: input.webhookSecret,
      createdAt: now,
      updatedAt: now,
    });
    await em.flush();
    return account;
  }

  async setPassword(id: string, passwordHash: string, now: Date): Promise<void> {
    await this.orm.em.fork().nativeUpdate(AccountSchema, { id }, { passwordHash, updatedAt: now });
  }

  /** Adds an application to an account's allowed list (admins get the apps they create). */
  async allowApp(id: string, appId: string, now: Date): Promise<void> {
    const em = this.orm.em.fork();
    const a = await em.findOneOrFail(AccountSchema, { id });
    if (!a.allowedApps.includes(appId)) a.allowedApps = [...a.allowedApps, appId];
    a.updatedAt = now;
    await em.flush();
  }
}
