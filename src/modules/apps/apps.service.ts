// Applications on the dashboard: settings, secrets, allowed hashes and the blacklist.
// Visibility is part of every query (AppScope), so an id from another tree finds nothing (404).
import { randomUUID } from 'node:crypto';
import { AppError, validationError } from '../../errors.js';
import { randomHex, randomToken } from '../../platform/crypto/index.js';
import type { Application, BlacklistType, KeyCosts } from '../../platform/db/entities/index.js';
import type { AppScope, ApplicationRepository } from './application.repository.js';
import type { Logger } from 'pino';
import type { AccountRepository, Principal } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { BlacklistRepository } from './blacklist.repository.js';
import type { EntitlementEntry, EntitlementRepository } from './entitlement.repository.js';
import { normalizeIpOrRange } from '../../platform/http/ip-address.js';
import { actorOf, appsPolicy, assertTokenApp, requirePermission, resellerScope } from '../access/index.js';
import { assertWebhookUrl } from '../notify/index.js';
import type { ClientAppCache } from '../client/index.js';
import type { AppPatch } from './apps.requests.js';
import type { EventBus } from '../notify/index.js';
import { normalizeHwid } from '../client/index.js';

/** Whether `v` is an absolute http(s) URL with a host: what outdated clients are sent in the 426. */
function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '' && v.trim() === v;
  } catch {
    return false;
  }
}

/** The applications an account reaches by its role (docs/protocol.md 11.9). */
function accountScope(p: Principal): AppScope {
  const reach = appsPolicy.reach(p);
  if (reach === 'all') return { kind: 'all' };
  if (reach === 'own') return { kind: 'owner', ownerId: p.account.id };
  return { kind: 'allowed', ownerId: p.account.ownerId, appIds: p.account.allowedApps };
}

/** What the caller reaches: its account's scope, narrowed to an API token's app_ids (docs/protocol.md 13.1). */
export function scopeOf(p: Principal): AppScope {
  const scope = accountScope(p);
  const only = p.token?.appIds;
  if (!only) return scope;
  if (scope.kind === 'all') return { kind: 'listed', appIds: only };
  if (scope.kind === 'owner') return { kind: 'allowed', ownerId: scope.ownerId, appIds: only };
  return { ...scope, appIds: scope.appIds.filter((id) => only.includes(id)) };
}

const PATCH_FIELDS: Record<keyof AppPatch, keyof Application> = {
  name: 'name',
  version: 'version',
  description: 'description',
  enabled: 'enabled',
  disabled_message: 'disabledMessage',
  keys_paused: 'keysPaused',
  hwid_lock: 'hwidLock',
  require_signature: 'requireSignature',
  injection_detection: 'injectionDetection',
  require_heartbeat: 'requireHeartbeat',
  force_update: 'forceUpdate',
  update_url: 'updateUrl',
  update_message: 'updateMessage',
  force_encryption: 'forceEncryption',
  hash_check: 'hashCheck',
  expected_binary_hash: 'expectedBinaryHash',
  webhook: 'webhook',
  key_costs: 'keyCosts',
  heartbeat_interval: 'heartbeatInterval',
  max_sessions: 'maxSessions',
  session_overflow: 'sessionOverflow',
  max_devices: 'maxDevices',
  trial_hours: 'trialHours',
  trial_level: 'trialLevel',
  offline_days: 'offlineDays',
  grace_hours: 'graceHours',
  expired_updates: 'expiredUpdates',
  portal_enabled: 'portalEnabled',
  portal_reset_cooldown_hours: 'portalResetCooldownHours',
};

/** What the applications service uses, and nothing more (one composition root: compose.ts). */
interface AppsServiceDeps {
  repos: {
    apps: ApplicationRepository;
    blacklist: BlacklistRepository;
    audit: AuditRepository;
    accounts: AccountRepository;
    entitlements: EntitlementRepository;
    /** Key and user counts per application: the keys module's (a port compose.ts fills). */
    records: {
      counts(
        ids: readonly string[],
        resellerIds?: readonly string[],
      ): Promise<Map<string, { keys: number; users: number }>>;
    };
  };
  allowPrivateWebhooks: boolean;
  log: Logger;
  now: () => number;
}

export class AppsService {
  constructor(
    private readonly d: AppsServiceDeps,
    private readonly appCache: ClientAppCache,
    private readonly events: EventBus,
  ) {}

  private now(): Date {
    return new Date(this.d.now());
  }

  /**
   * The app if the caller may see it; 404 otherwise (never 403: ids of other trees don't leak). An
   * app of the account's that an API token is not limited to answers 403 (docs/protocol.md 13.1).
   */
  async visible(p: Principal, id: string): Promise<Application> {
    const app = await this.d.repos.apps.findInScope(accountScope(p), id);
    if (!app) throw new AppError('app_not_found');
    assertTokenApp(p, app.id);
    return app;
  }

  async create(p: Principal, input: { name: string; version?: string; description?: string }): Promise<Application> {
    appsPolicy.assertManage(p);
    const now = this.now();
    const created = appsPolicy.created(p);
    const app = await this.d.repos.apps.create({
      id: randomUUID(),
      ownerId: created.ownerId,
      name: input.name,
      version: input.version ?? '1.0',
      description: input.description ?? '',
      enabled: true,
      disabledMessage: '',
      keysPaused: false,
      hwidLock: false,
      requireSignature: false,
      injectionDetection: true,
      requireHeartbeat: false,
      forceUpdate: false,
      updateUrl: '',
      updateMessage: '',
      forceEncryption: false,
      hashCheck: false,
      expectedBinaryHash: '',
      webhook: '',
      keyCosts: {},
      allowedHashes: [],
      heartbeatInterval: 30,
      maxSessions: 0,
      sessionOverflow: 'reject',
      maxDevices: 1,
      trialHours: 0,
      trialLevel: 1,
      offlineDays: 0,
      graceHours: 0,
      expiredUpdates: 'none',
      portalEnabled: false,
      portalResetCooldownHours: 24,
      apiKey: randomHex(16),
      apiSecret: randomToken(32),
      createdBy: p.account.id,
      createdAt: now,
      updatedAt: now,
    });
    // An admin sees only its allowed apps: the app it creates is one of them.
    if (created.allowCreator) await this.d.repos.accounts.allowApp(p.account.id, app.id, now);
    this.d.repos.audit.write({
      appId: app.id,
      action: 'app.create',
      detail: `Application "${app.name}" created`,
      actor: actorOf(p),
    });
    return app;
  }

  list(p: Principal): Promise<Application[]> {
    return this.d.repos.apps.list(scopeOf(p));
  }

  async update(p: Principal, id: string, patch: AppPatch): Promise<Application> {
    appsPolicy.assertManage(p);
    await this.visible(p, id);
    const changes: Partial<Application> = { updatedAt: this.now() };
    for (const [field, value] of Object.entries(patch) as [keyof AppPatch, unknown][]) {
      if (value === undefined) continue;
      (changes as Record<string, unknown>)[PATCH_FIELDS[field]] = value;
    }
    if (patch.expected_binary_hash !== undefined) changes.expectedBinaryHash = patch.expected_binary_hash.toLowerCase();
    if (patch.webhook !== undefined && patch.webhook !== '')
      await assertWebhookUrl(patch.webhook, this.d.allowPrivateWebhooks);
    if (patch.update_url !== undefined && patch.update_url !== '' && !isHttpUrl(patch.update_url))
      throw validationError(
        'update_url',
        'Update URL must be an http or https address, e.g. https://example.com/download',
        'url_parsing',
      );
    if (patch.key_costs !== undefined) {
      const costs: KeyCosts = {};
      for (const [tier, v] of Object.entries(patch.key_costs))
        if (v !== null && v !== undefined) costs[tier as keyof KeyCosts] = v;
      changes.keyCosts = costs;
    }
    const app = await this.d.repos.apps.update(scopeOf(p), id, changes);
    if (!app) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.update',
      detail: `Settings changed: ${Object.keys(patch).join(', ')}`,
      actor: actorOf(p),
    });
    return app;
  }

  /** Irreversible: the app with every key, user, log and ban; live sessions end on their next call. */
  async remove(p: Principal, id: string): Promise<void> {
    appsPolicy.assertManage(p);
    if (!(await this.d.repos.apps.delete(scopeOf(p), id))) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    // Every worker ends the app's live heartbeat sessions.
    await this.events.publish('app.delete', id, {});
    this.d.log.info({ appId: id, by: p.account.id }, 'app.delete');
    // The app's own log went with it: who deleted it is an account-level entry.
    this.d.repos.audit.write({
      appId: null,
      action: 'app.delete',
      detail: `Application ${id} deleted`,
      actor: actorOf(p),
    });
  }

  /** A new api_secret: signatures made with the old one stop verifying at once (on every worker). */
  async rotateSecret(p: Principal, id: string): Promise<Application> {
    appsPolicy.assertManage(p);
    await this.visible(p, id);
    const app = await this.d.repos.apps.update(scopeOf(p), id, { apiSecret: randomToken(32), updatedAt: this.now() });
    if (!app) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.rotate_secret',
      level: 'warning',
      detail: 'API secret rotated',
      actor: actorOf(p),
    });
    return app;
  }

  async setHashes(p: Principal, id: string, hashes: string[]): Promise<Application> {
    appsPolicy.assertManage(p);
    await this.visible(p, id);
    const allowedHashes = [...new Set(hashes.map((h) => h.toLowerCase()))];
    const app = await this.d.repos.apps.update(scopeOf(p), id, { allowedHashes, updatedAt: this.now() });
    if (!app) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.hashes',
      detail: `${allowedHashes.length} allowed binary hashes`,
      actor: actorOf(p),
    });
    return app;
  }

  /** docs/protocol.md 12.3: the catalogue, read by every member who sees the app. */
  async entitlements(p: Principal, id: string): Promise<EntitlementEntry[]> {
    await this.visible(p, id);
    return this.d.repos.entitlements.list(id);
  }

  /** The catalogue's codes (generation and PATCH of keys check against them). */
  async entitlementCodes(appId: string): Promise<Set<string>> {
    return new Set((await this.d.repos.entitlements.list(appId)).map((e) => e.code));
  }

  /** Replaces the catalogue (owners, admins, developers); a code removed from it leaves every key. */
  async setEntitlements(
    p: Principal,
    id: string,
    entries: readonly { code: string; name?: string | undefined }[],
  ): Promise<EntitlementEntry[]> {
    appsPolicy.assertManage(p);
    await this.visible(p, id);
    const seen = new Set<string>();
    entries.forEach((e, i) => {
      if (seen.has(e.code))
        throw validationError(['entitlements', i, 'code'], `Code ${e.code} appears twice`, 'value_error');
      seen.add(e.code);
    });
    const list = entries.map((e) => ({ code: e.code, name: e.name ?? '' }));
    const stripped = await this.d.repos.entitlements.replace(id, list);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.entitlements',
      detail:
        `${list.length} entitlements in the catalogue` + (stripped > 0 ? `; ${stripped} keys lost removed codes` : ''),
      actor: actorOf(p),
    });
    await this.events.publish('app.entitlements', id, { codes: list.map((e) => e.code), keys_changed: stripped });
    return list;
  }

  /**
   * Keys and end users per application (the app cards). A reseller gets the counts of its own scoped
   * records, and only with view_stats; without it none (undefined, docs/protocol.md 15.3).
   */
  async counts(
    p: Principal,
    ids: readonly string[],
  ): Promise<Map<string, { keys: number; users: number }> | undefined> {
    const stats = appsPolicy.stats(p);
    if (stats === 'all') return this.d.repos.records.counts(ids);
    if (stats === 'none') return undefined;
    return this.d.repos.records.counts(ids, await resellerScope(this.d.repos.accounts, p));
  }

  /** An `ip` entry may be a CIDR range (docs/protocol.md 15.4); `reason` is kept with the entry. */
  async addBan(p: Principal, appId: string, type: BlacklistType, rawValue: string, reason = '') {
    appsPolicy.assertManage(p);
    await this.visible(p, appId);
    let value = rawValue.trim();
    if (type === 'ip') {
      const ip = normalizeIpOrRange(value);
      if (ip === null)
        throw validationError(
          'value',
          'Value must be an IPv4 or IPv6 address or a CIDR range (10.0.0.0/8, 2001:db8::/32)',
          'value_error',
        );
      value = ip;
    } else {
      value = normalizeHwid(value);
    }
    const why = reason.trim();
    const entry = await this.d.repos.blacklist.add(appId, type, value, why, p.account.id, this.now());
    await this.appCache.invalidate(appId);
    this.d.repos.audit.write({
      appId,
      action: 'blacklist.add',
      detail: `${type} ${value} blacklisted${why ? `: ${why}` : ''}`,
      actor: actorOf(p),
    });
    return entry;
  }

  async removeBan(p: Principal, banId: string): Promise<void> {
    appsPolicy.assertManage(p);
    const entry = await this.d.repos.blacklist.findById(banId);
    if (!entry) throw new AppError('ban_not_found');
    const app = await this.d.repos.apps.findInScope(accountScope(p), entry.appId);
    if (!app) throw new AppError('ban_not_found');
    assertTokenApp(p, app.id);
    await this.d.repos.blacklist.remove(banId);
    await this.appCache.invalidate(entry.appId);
    this.d.repos.audit.write({
      appId: entry.appId,
      action: 'blacklist.remove',
      detail: `${entry.type} ${entry.value} removed from blacklist`,
      actor: actorOf(p),
    });
  }

  async listBans(p: Principal, appId: string) {
    requirePermission(p, 'view_blocked_ips');
    await this.visible(p, appId);
    return this.d.repos.blacklist.list(appId);
  }
}
