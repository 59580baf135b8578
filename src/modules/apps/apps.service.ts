// Applications and what hangs off them on the dashboard: settings, key generation, blacklist, logs.
// Visibility is part of every query (AppScope), so an id from another tree finds nothing (404).
import { randomInt, randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { AppError, validationError } from '../../errors.js';
import { hmacSha256, randomHex, randomToken } from '../../platform/crypto/index.js';
import type { Application, BlacklistType, DurationUnit, KeyCosts } from '../../platform/db/entities/index.js';
import type { AppScope } from './application.repository.js';
import type { AuditRow } from '../audit/audit.repository.js';
import { KeySpaceExhausted, type LicenseRow } from '../keys/license.repository.js';
import type { Logger } from 'pino';
import type { Repositories } from '../../services.js';
import { normalizeIp } from '../../platform/http/ip-address.js';
import { hasPermission, requirePermission, type Principal } from '../access/principal.js';
import {
  ALPHABET_CLASSES,
  DEFAULT_ALPHABET,
  DEFAULT_MASK,
  ENUMERABLE_KEY_SPACE,
  durationDays,
  enumerateKeys,
  expandMask,
  keyPreview,
  keySpace,
  normalizeAlphabet,
  placeholderCount,
  pricePerKey,
} from '../keys/license-keys.js';
import { assertWebhookUrl } from '../notify/webhook-url.js';
import type { ClientAppCache } from '../client/client-app-cache.js';
import type { AppPatch, GenerateInput } from './dashboard-requests.js';
import type { EventBus } from '../notify/events.js';

export const MAX_DURATION_DAYS = 3650;

function spaceExhausted(amount: number) {
  return validationError(
    'mask',
    `This mask and alphabet cannot produce ${amount} new keys for this application`,
    'value_error',
  );
}

export function scopeOf(p: Principal): AppScope {
  if (p.role === 'developer') return { kind: 'all' };
  if (p.role === 'owner') return { kind: 'owner', ownerId: p.account.id };
  return { kind: 'allowed', ownerId: p.account.ownerId, appIds: p.account.allowedApps };
}

/** Effective beat interval: heartbeat_interval clamped to [5, 300] (PROTOCOL 6). */
export function beatInterval(heartbeatInterval: number): number {
  return Math.min(300, Math.max(5, heartbeatInterval));
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
};

/** What the applications service uses, and nothing more (one composition root: app.ts). */
export interface AppsServiceDeps {
  repos: Pick<Repositories, 'apps' | 'licenses' | 'blacklist' | 'audit' | 'accounts'>;
  licenseHashKey: Buffer;
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

  /** The app if the caller may see it; 404 otherwise (never 403: ids of other trees don't leak). */
  async visible(p: Principal, id: string): Promise<Application> {
    const app = await this.d.repos.apps.findInScope(scopeOf(p), id);
    if (!app) throw new AppError('app_not_found');
    return app;
  }

  private assertManager(p: Principal): void {
    if (p.role === 'reseller') throw new AppError('permission_denied');
  }

  async create(p: Principal, input: { name: string; version?: string; description?: string }): Promise<Application> {
    this.assertManager(p);
    const now = this.now();
    const app = await this.d.repos.apps.create({
      id: randomUUID(),
      ownerId: p.role === 'admin' ? p.account.ownerId : p.account.id,
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
      apiKey: randomHex(16),
      apiSecret: randomToken(32),
      createdBy: p.account.id,
      createdAt: now,
      updatedAt: now,
    });
    // An admin sees only its allowed apps: the app it creates is one of them.
    if (p.role === 'admin') await this.d.repos.accounts.allowApp(p.account.id, app.id, now);
    this.d.repos.audit.write({
      appId: app.id,
      action: 'app.create',
      detail: `Application "${app.name}" created`,
      actorId: p.account.id,
    });
    return app;
  }

  list(p: Principal): Promise<Application[]> {
    return this.d.repos.apps.list(scopeOf(p));
  }

  async update(p: Principal, id: string, patch: AppPatch): Promise<Application> {
    this.assertManager(p);
    await this.visible(p, id);
    const changes: Partial<Application> = { updatedAt: this.now() };
    for (const [field, value] of Object.entries(patch) as [keyof AppPatch, unknown][]) {
      if (value === undefined) continue;
      (changes as Record<string, unknown>)[PATCH_FIELDS[field]] = value;
    }
    if (patch.expected_binary_hash !== undefined) changes.expectedBinaryHash = patch.expected_binary_hash.toLowerCase();
    if (patch.webhook !== undefined && patch.webhook !== '')
      await assertWebhookUrl(patch.webhook, this.d.allowPrivateWebhooks);
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
      actorId: p.account.id,
    });
    return app;
  }

  /** Irreversible: the app with every key, user, log and ban; live sessions end on their next call. */
  async remove(p: Principal, id: string): Promise<void> {
    this.assertManager(p);
    if (!(await this.d.repos.apps.delete(scopeOf(p), id))) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    // Every worker ends the app's live heartbeat sessions.
    await this.events.publish('app.delete', id, {});
    this.d.log.info({ appId: id, by: p.account.id }, 'app.delete');
  }

  /** A new api_secret: signatures made with the old one stop verifying at once (on every worker). */
  async rotateSecret(p: Principal, id: string): Promise<Application> {
    this.assertManager(p);
    await this.visible(p, id);
    const app = await this.d.repos.apps.update(scopeOf(p), id, { apiSecret: randomToken(32), updatedAt: this.now() });
    if (!app) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.rotate_secret',
      level: 'warning',
      detail: 'API secret rotated',
      actorId: p.account.id,
    });
    return app;
  }

  async setHashes(p: Principal, id: string, hashes: string[]): Promise<Application> {
    this.assertManager(p);
    await this.visible(p, id);
    const allowedHashes = [...new Set(hashes.map((h) => h.toLowerCase()))];
    const app = await this.d.repos.apps.update(scopeOf(p), id, { allowedHashes, updatedAt: this.now() });
    if (!app) throw new AppError('app_not_found');
    await this.appCache.invalidate(id);
    this.d.repos.audit.write({
      appId: id,
      action: 'app.hashes',
      detail: `${allowedHashes.length} allowed binary hashes`,
      actorId: p.account.id,
    });
    return app;
  }

  /**
   * Where new keys come from (PROTOCOL 11.19), decided before any work: random draws over a large key
   * space; over a small one, the exact list of keys the application does not have yet, shuffled,
   * so a mask that cannot yield `amount` new keys is refused at once instead of searched forever.
   */
  private async keySource(appId: string, mask: string, alphabet: string, amount: number) {
    const key = this.d.licenseHashKey;
    const entry = (plaintext: string) => ({
      plaintext,
      keyHash: licenseHash(key, plaintext),
      keyPreview: keyPreview(plaintext),
    });
    const space = keySpace(mask, alphabet.length);
    if (space < BigInt(amount)) throw spaceExhausted(amount);
    if (space > BigInt(ENUMERABLE_KEY_SPACE)) return () => entry(expandMask(mask, alphabet));
    const all = [...enumerateKeys(mask, alphabet)].map(entry);
    const taken = await this.d.repos.licenses.existingHashes(
      appId,
      all.map((k) => k.keyHash),
    );
    const left = all.filter((k) => !taken.has(k.keyHash));
    if (left.length < amount) throw spaceExhausted(amount);
    for (let i = left.length - 1; i > 0; i--) {
      const j = randomInt(i + 1);
      [left[i], left[j]] = [left[j]!, left[i]!];
    }
    return () => left.pop() ?? null;
  }

  /** SPEC key generation rules 1-6; plaintext keys exist only in this return value. */
  async generateLicenses(
    p: Principal,
    appId: string,
    input: GenerateInput,
  ): Promise<{ row: LicenseRow; key: string }[]> {
    requirePermission(p, 'generate_keys');
    const app = await this.visible(p, appId);
    const unit = input.unit ?? 'days';
    if (unit !== 'lifetime' && input.duration === undefined)
      throw validationError('duration', 'Duration is required unless the unit is lifetime', 'missing');
    const value = unit === 'lifetime' ? 0 : input.duration!;
    const days = durationDays(value, unit);
    if (days > MAX_DURATION_DAYS)
      throw validationError('duration', `Duration must be at most ${MAX_DURATION_DAYS} days`, 'less_than_equal');
    const mask = input.mask ?? DEFAULT_MASK;
    if (placeholderCount(mask) === 0)
      throw validationError('mask', 'Mask needs at least one placeholder (*, # or X)', 'value_error');
    const alphabet = normalizeAlphabet(input.alphabet ?? DEFAULT_ALPHABET);
    if (!ALPHABET_CLASSES.test(alphabet)) {
      throw validationError(
        'alphabet',
        'Alphabet must be letters and digits from the Uppercase, Lowercase and Numbers classes',
        'value_error',
      );
    }
    const makeKey = await this.keySource(appId, mask, alphabet, input.amount);
    const generatorIsStaff = p.role === 'admin' || p.role === 'reseller';
    const charge =
      p.role === 'reseller'
        ? { accountId: p.account.id, amount: pricePerKey(days, app.keyCosts) * input.amount }
        : null;
    const created = await this.d.repos.licenses
      .insertBatch(
        {
          appId,
          level: input.level ?? 1,
          durationValue: value,
          durationUnit: unit,
          durationDays: days,
          note: input.note ?? '',
          resellerId: generatorIsStaff ? p.account.id : null,
          createdBy: p.account.id,
          charge,
        },
        input.amount,
        makeKey,
        this.now(),
      )
      .catch((err: unknown) => {
        if (err instanceof KeySpaceExhausted) throw spaceExhausted(input.amount);
        throw err;
      });
    await this.events.publish(
      'license.generate',
      appId,
      { count: created.length, license_ids: created.map((c) => c.row.id) },
      generatorIsStaff ? p.account.id : null,
    );
    this.d.repos.audit.write({
      appId,
      action: 'license.generate',
      actorId: p.account.id,
      resellerId: generatorIsStaff ? p.account.id : null,
      detail:
        `${input.amount} keys generated (${unit === 'lifetime' ? 'lifetime' : `${value} ${unit}`}, ` +
        `level ${input.level ?? 1})${charge ? `, ${charge.amount} credits` : ''}`,
    });
    return created;
  }

  /** Keys and end users per application (the app cards). */
  counts(ids: readonly string[]): Promise<Map<string, { keys: number; users: number }>> {
    return this.d.repos.apps.counts(ids);
  }

  async addBan(p: Principal, appId: string, type: BlacklistType, rawValue: string) {
    this.assertManager(p);
    await this.visible(p, appId);
    let value = rawValue.trim();
    if (type === 'ip') {
      if (isIP(value) === 0) throw validationError('value', 'Value must be an IPv4 or IPv6 address', 'value_error');
      value = normalizeIp(value);
    } else {
      value = value.toLowerCase(); // HWIDs are compared lower-cased (SPEC register/login/license)
    }
    const entry = await this.d.repos.blacklist.add(appId, type, value, p.account.id, this.now());
    await this.appCache.invalidate(appId);
    this.d.repos.audit.write({
      appId,
      action: 'blacklist.add',
      detail: `${type} ${value} blacklisted`,
      actorId: p.account.id,
    });
    return entry;
  }

  async removeBan(p: Principal, banId: string): Promise<void> {
    this.assertManager(p);
    const entry = await this.d.repos.blacklist.findById(banId);
    if (!entry) throw new AppError('ban_not_found');
    const app = await this.d.repos.apps.findInScope(scopeOf(p), entry.appId);
    if (!app) throw new AppError('ban_not_found');
    await this.d.repos.blacklist.remove(banId);
    await this.appCache.invalidate(entry.appId);
    this.d.repos.audit.write({
      appId: entry.appId,
      action: 'blacklist.remove',
      detail: `${entry.type} ${entry.value} removed from blacklist`,
      actorId: p.account.id,
    });
  }

  async listBans(p: Principal, appId: string) {
    requirePermission(p, 'view_blocked_ips');
    await this.visible(p, appId);
    return this.d.repos.blacklist.list(appId);
  }

  async logs(
    p: Principal,
    appId: string,
    q: { level?: string; action?: string; limit?: number; before?: string },
  ): Promise<AuditRow[]> {
    requirePermission(p, 'view_auth_logs');
    await this.visible(p, appId);
    const resellerIds = p.role === 'admin' || p.role === 'reseller' ? await this.subtreeIds(p.account.id) : undefined;
    // Hiding is applied by the view (access/visibility.ts): hidden fields are absent (PROTOCOL 11.17).
    return this.d.repos.audit.list({
      appId,
      level: q.level,
      action: q.action,
      limit: q.limit ?? 100,
      before: q.before,
      resellerIds,
    });
  }

  /** The account and every account below it (reseller scoping, PROTOCOL 11.9). */
  subtreeIds(accountId: string): Promise<string[]> {
    return this.d.repos.accounts.subtreeIds(accountId);
  }
}

export function licenseHash(key: Buffer, plaintext: string): string {
  return hmacSha256(key, plaintext).toString('hex');
}
