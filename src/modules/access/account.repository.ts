import { randomUUID } from 'node:crypto';
import type { Orm } from '../../platform/db/orm.js';
import { AccountSchema, noPermissions, type Account, type StoredRole } from '../../platform/db/entities/index.js';

interface NewAccount {
  username: string;
  passwordHash: string;
  role: StoredRole;
  parentId: string | null;
  ownerId?: string;
  email?: string | null;
  displayName?: string;
  webhookSecret: string;
}

/** Every account below `?` (not itself), by walking parent_id. */
const DESCENDANTS_SQL = `with recursive sub(id) as (
    select id from accounts where parent_id = ? union all select a.id from accounts a join sub on a.parent_id = sub.id)
  select id from sub`;

/** Whether the account or an admin above it has a subscription that ended before `?` (docs/protocol.md 11.30). */
const SUBSCRIPTION_LAPSED_SQL = `with recursive up(parent_id, role, ends) as (
    select parent_id, role, subscription_expires_at from accounts where id = ?
    union all
    select a.parent_id, a.role, a.subscription_expires_at from accounts a join up on a.id = up.parent_id)
  select exists(select 1 from up where role = 'admin' and ends is not null and ends < ?) as lapsed`;

export class AccountRepository {
  constructor(private readonly orm: Orm) {}

  /** Subscriptions bind an admin's whole subtree: true when this account's or an ancestor admin's has ended. */
  async subscriptionLapsed(accountId: string, now: Date): Promise<boolean> {
    const rows = await this.orm.em
      .getConnection()
      .execute<{ lapsed: boolean }[]>(SUBSCRIPTION_LAPSED_SQL, [accountId, now]);
    return rows[0]?.lapsed === true;
  }

  /** The account and every account below it (reseller scoping, docs/protocol.md 11.9). */
  async subtreeIds(accountId: string): Promise<string[]> {
    const rows = await this.orm.em.getConnection().execute<{ id: string }[]>(DESCENDANTS_SQL, [accountId]);
    return [accountId, ...rows.map((r) => r.id)];
  }

  /**
   * Whose audit entries the account may read (docs/protocol.md 11.32): its subtree as it is now, and every
   * deleted member that was below it when it was deleted. Never used to authorize an action.
   */
  async auditScopeIds(accountId: string): Promise<string[]> {
    const [live, gone] = await Promise.all([
      this.subtreeIds(accountId),
      this.orm.em
        .getConnection()
        .execute<{ id: string }[]>(`select id from deleted_accounts where ancestor_ids @> jsonb_build_array(?::text)`, [
          accountId,
        ]),
    ]);
    return [...live, ...gone.map((r) => r.id)];
  }

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
      twoFactorSecret: null,
      twoFactorPending: null,
      twoFactorLastStep: null,
      requireTwoFactor: false,
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
