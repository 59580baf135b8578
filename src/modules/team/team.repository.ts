// The team tree's writes: members' fields, credits, adopted children on deletion.
import type { Orm } from '../../platform/db/orm.js';
import { AccountSchema, type Account } from '../../platform/db/entities/index.js';
import type { AccountRepository } from '../access/index.js';

/** A deleted account's tombstone: its name, role and every account above it (parent first). */
const DELETED_SQL = `insert into deleted_accounts (id, username, role, ancestor_ids, deleted_at)
  with recursive up(id, parent_id, depth) as (
    select id, parent_id, 0 from accounts where id = ?
    union all select a.id, a.parent_id, up.depth + 1 from accounts a join up on a.id = up.parent_id)
  select a.id, a.username, a.role,
    coalesce((select jsonb_agg(up.id::text order by up.depth) from up where up.id <> ?), '[]'::jsonb), now()
  from accounts a where a.id = ?
  on conflict (id) do nothing`;

/** The largest balance the int4 column holds. */
export const MAX_CREDITS = 2_147_483_647;

export class TeamRepository {
  constructor(
    private readonly orm: Orm,
    private readonly accounts: Pick<AccountRepository, 'subtreeIds'>,
  ) {}

  /** Every account below `rootId` (not itself), by walking parent_id. */
  async descendants(rootId: string): Promise<Account[]> {
    const em = this.orm.em.fork();
    const ids = (await this.accounts.subtreeIds(rootId)).filter((id) => id !== rootId);
    if (ids.length === 0) return [];
    return em.find(AccountSchema, { id: { $in: ids } }, { orderBy: { createdAt: 'asc' } });
  }

  all(): Promise<Account[]> {
    return this.orm.em.fork().find(AccountSchema, {}, { orderBy: { createdAt: 'asc' } });
  }

  findByEmail(email: string): Promise<Account | null> {
    return this.orm.em.fork().findOne(AccountSchema, { email });
  }

  async update(id: string, patch: Partial<Account>): Promise<Account> {
    const em = this.orm.em.fork();
    const a = await em.findOneOrFail(AccountSchema, { id });
    em.assign(a, patch);
    await em.flush();
    return a;
  }

  /** Deletes an account, moving its children under `newParentId`; returns how many moved. */
  async deleteAndAdopt(id: string, newParentId: string): Promise<number> {
    const em = this.orm.em.fork();
    return em.transactional(async (tx) => {
      // docs/protocol.md 11.32: the accounts above it are kept, so its audit entries stay theirs to read.
      await tx.execute(DELETED_SQL, [id, id, id]);
      const moved = await tx.nativeUpdate(AccountSchema, { parentId: id }, { parentId: newParentId });
      await tx.nativeDelete(AccountSchema, { id });
      return moved;
    });
  }

  /** Credits top-up in one statement: clamped at 0; an unlimited balance becomes finite at the amount. */
  /**
   * Adds (or removes) credits, clamping the balance at 0; false when the balance would pass int4's
   * maximum (nothing is written: docs/protocol.md 11.25).
   */
  async addCredits(id: string, amount: number, now: Date): Promise<boolean> {
    const rows: unknown[] = await this.orm.em
      .fork()
      .getConnection()
      .execute(
        `update accounts set key_quota = greatest(0, coalesce(key_quota, 0) + ?), updated_at = ?
         where id = ? and coalesce(key_quota, 0)::bigint + ? <= ${MAX_CREDITS} returning id`,
        [amount, now, id, amount],
      );
    return rows.length > 0;
  }

  /** Removes app ids from the allowed lists of these accounts. */
  async removeApps(ids: readonly string[], appIds: readonly string[], now: Date): Promise<void> {
    if (ids.length === 0 || appIds.length === 0) return;
    const em = this.orm.em.fork();
    const accounts = await em.find(AccountSchema, { id: { $in: [...ids] } });
    for (const a of accounts) {
      a.allowedApps = a.allowedApps.filter((x) => !appIds.includes(x));
      a.updatedAt = now;
    }
    await em.flush();
  }
}
