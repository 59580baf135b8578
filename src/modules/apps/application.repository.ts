import type { Orm } from '../../platform/db/orm.js';
import { ApplicationSchema, type Application } from '../../platform/db/entities/index.js';
import type { ClientAppRow } from '../client/index.js';
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

const CLIENT_APP_COLUMNS = `id, owner_id, name, version, enabled, disabled_message, keys_paused, hwid_lock,
  require_signature,
  injection_detection, require_heartbeat, force_update, update_url, update_message, force_encryption, hash_check,
  expected_binary_hash, allowed_hashes, heartbeat_interval, max_sessions, session_overflow, api_secret, max_devices,
  trial_hours, trial_level, offline_days, grace_hours, expired_updates`;

/** An application as the customer portal reads it. */
export interface PortalApp {
  id: string;
  name: string;
  portal_enabled: boolean;
  portal_reset_cooldown_hours: number;
  max_devices: number;
  hwid_lock: boolean;
  offline_days: number;
  /** docs/spec.md's pause of license validation: portal writes are refused while it is on (docs/protocol.md 11.34). */
  keys_paused: boolean;
}

const PORTAL_APP_COLUMNS =
  'id, name, portal_enabled, portal_reset_cooldown_hours, max_devices, hwid_lock, offline_days, keys_paused';

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

  portalAppByApiKey(apiKey: string): Promise<PortalApp | undefined> {
    return this.sql.one<PortalApp>(`select ${PORTAL_APP_COLUMNS} from applications where api_key = ?`, [apiKey]);
  }

  portalAppById(id: string): Promise<PortalApp | undefined> {
    return this.sql.one<PortalApp>(`select ${PORTAL_APP_COLUMNS} from applications where id = ?`, [id]);
  }

  findForClientByApiKey(apiKey: string): Promise<ClientAppRow | undefined> {
    return this.sql.one<ClientAppRow>(`select ${CLIENT_APP_COLUMNS} from applications where api_key = ?`, [apiKey]);
  }

  findForClientById(id: string): Promise<ClientAppRow | undefined> {
    return this.sql.one<ClientAppRow>(`select ${CLIENT_APP_COLUMNS} from applications where id = ?`, [id]);
  }
}
