import type { Orm } from '../../platform/db/orm.js';
import {
  ApplicationSchema,
  type Application,
  type ExpiredUpdates,
  type SessionOverflow,
} from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';

/** Which applications a caller may see: every app, one owner's apps, or an allowed list inside one tree. */
export type AppScope =
  | { kind: 'all' }
  | { kind: 'owner'; ownerId: string }
  | { kind: 'allowed'; ownerId: string; appIds: readonly string[] }
  /** A developer's API token limited to some applications, whatever their owners. */
  | { kind: 'listed'; appIds: readonly string[] };

function scopeWhere(scope: AppScope): Record<string, unknown> {
  switch (scope.kind) {
    case 'all':
      return {};
    case 'owner':
      return { ownerId: scope.ownerId };
    case 'allowed':
      return { ownerId: scope.ownerId, id: { $in: [...scope.appIds] } };
    case 'listed':
      return { id: { $in: [...scope.appIds] } };
  }
}

/**
 * One app by id, inside a scope. Built explicitly rather than by spreading scopeWhere over
 * `{ id }`: the scope's own `id` condition would replace the requested id and match every
 * allowed app.
 */
function oneInScope(scope: AppScope, id: string): Record<string, unknown> | null {
  switch (scope.kind) {
    case 'all':
      return { id };
    case 'owner':
      return { id, ownerId: scope.ownerId };
    case 'allowed':
      return scope.appIds.includes(id) ? { id, ownerId: scope.ownerId } : null;
    case 'listed':
      return scope.appIds.includes(id) ? { id } : null;
  }
}

/** The fields the client hot path needs, read with one indexed query and no ORM bookkeeping. */
export interface ClientAppRow {
  id: string;
  owner_id: string;
  name: string;
  version: string;
  enabled: boolean;
  disabled_message: string;
  keys_paused: boolean;
  hwid_lock: boolean;
  require_signature: boolean;
  injection_detection: boolean;
  require_heartbeat: boolean;
  force_update: boolean;
  update_url: string;
  update_message: string;
  force_encryption: boolean;
  hash_check: boolean;
  expected_binary_hash: string;
  allowed_hashes: string[];
  heartbeat_interval: number;
  max_sessions: number;
  session_overflow: SessionOverflow;
  api_secret: string;
  max_devices: number;
  trial_hours: number;
  trial_level: number;
  offline_days: number;
  grace_hours: number;
  expired_updates: ExpiredUpdates;
}

const CLIENT_APP_COLUMNS = `id, owner_id, name, version, enabled, disabled_message, keys_paused, hwid_lock,
  require_signature,
  injection_detection, require_heartbeat, force_update, update_url, update_message, force_encryption, hash_check,
  expected_binary_hash, allowed_hashes, heartbeat_interval, max_sessions, session_overflow, api_secret, max_devices,
  trial_hours, trial_level, offline_days, grace_hours, expired_updates`;

export class ApplicationRepository {
  constructor(
    private readonly orm: Orm,
    private readonly sql: Sql,
  ) {}

  async create(app: Application): Promise<Application> {
    const em = this.orm.em.fork();
    const entity = em.create(ApplicationSchema, app);
    await em.flush();
    return entity;
  }

  /** Whether an app is inside a scope: one indexed read, without the ORM (every call naming a record asks). */
  async reaches(scope: AppScope, id: string): Promise<boolean> {
    const where = oneInScope(scope, id);
    if (!where) return false;
    const row =
      'ownerId' in where
        ? await this.sql.one('select 1 from applications where id = ? and owner_id = ?', [id, where.ownerId])
        : await this.sql.one('select 1 from applications where id = ?', [id]);
    return row !== undefined;
  }

  /** The application a key, end user, blacklist entry or product belongs to; null when there is none. */
  async appOfRecord(kind: 'license' | 'user' | 'ban' | 'product', id: string): Promise<string | null> {
    const table = { license: 'license_keys', user: 'end_users', ban: 'blacklist_entries', product: 'products' }[kind];
    const row = await this.sql.one<{ app_id: string }>(`select app_id from ${table} where id = ?`, [id]);
    return row?.app_id ?? null;
  }

  list(scope: AppScope): Promise<Application[]> {
    return this.orm.em.fork().find(ApplicationSchema, scopeWhere(scope), { orderBy: { createdAt: 'asc' } });
  }

  async findInScope(scope: AppScope, id: string): Promise<Application | null> {
    const where = oneInScope(scope, id);
    return where ? this.orm.em.fork().findOne(ApplicationSchema, where) : null;
  }

  /** Applies `patch` to an app in scope; returns the updated app, or null when not in scope. */
  async update(scope: AppScope, id: string, patch: Partial<Application>): Promise<Application | null> {
    const where = oneInScope(scope, id);
    if (!where) return null;
    const em = this.orm.em.fork();
    const app = await em.findOne(ApplicationSchema, where);
    if (!app) return null;
    em.assign(app, patch);
    await em.flush();
    return app;
  }

  /** Deletes an app in scope; its keys, users, bans and logs go with it (ON DELETE CASCADE). */
  async delete(scope: AppScope, id: string): Promise<boolean> {
    const where = oneInScope(scope, id);
    return where !== null && (await this.orm.em.fork().nativeDelete(ApplicationSchema, where)) > 0;
  }

  findForClientByApiKey(apiKey: string): Promise<ClientAppRow | undefined> {
    return this.sql.one<ClientAppRow>(`select ${CLIENT_APP_COLUMNS} from applications where api_key = ?`, [apiKey]);
  }

  findForClientById(id: string): Promise<ClientAppRow | undefined> {
    return this.sql.one<ClientAppRow>(`select ${CLIENT_APP_COLUMNS} from applications where id = ?`, [id]);
  }

  /** Key and user counts per application (SPEC "stats"), one grouped query each. */
  async counts(
    ids: readonly string[],
    /** Only records whose reseller_id is one of these (a reseller's own); undefined: every record. */
    resellerIds?: readonly string[],
  ): Promise<Map<string, { keys: number; users: number }>> {
    const out = new Map<string, { keys: number; users: number }>(ids.map((id) => [id, { keys: 0, users: 0 }]));
    if (ids.length === 0 || resellerIds?.length === 0) return out;
    const marks = ids.map(() => '?').join(',');
    const scoped = resellerIds ? ` and reseller_id in (${resellerIds.map(() => '?').join(',')})` : '';
    const params = [...ids, ...(resellerIds ?? [])];
    const [keys, users] = await Promise.all([
      this.sql.all<{ app_id: string; n: string }>(
        `select app_id, count(*) as n from license_keys where app_id in (${marks})${scoped} group by app_id`,
        params,
      ),
      this.sql.all<{ app_id: string; n: string }>(
        `select app_id, count(*) as n from end_users where app_id in (${marks})${scoped} group by app_id`,
        params,
      ),
    ]);
    for (const r of keys) out.get(r.app_id)!.keys = Number(r.n);
    for (const r of users) out.get(r.app_id)!.users = Number(r.n);
    return out;
  }
}
