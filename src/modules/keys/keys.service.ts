// Dashboard management of license keys and end users (docs/spec.md "Dashboard: license keys",
// "Dashboard: end users", "Reseller scoping and hiding"). Each mutation is audited and published
// as a live event; revocations reach live heartbeat sessions through the event bus.
import { AppError, ValidationError, validationError } from '../../errors.js';
import type { DurationUnit } from '../../platform/db/entities/index.js';
import type { KeyAdminRepository, ResellerScope, TimeseriesMetric, UserRow } from './key-admin.repository.js';
import type { LicenseRow } from './license.repository.js';
import type { AuditRepository } from '../audit/index.js';
import { toDate } from '../../platform/db/sql.js';
import type { AppsService } from '../apps/index.js';
import type { EventBus, WebhookService } from '../notify/index.js';
import type { DeviceRepository } from './device.repository.js';
import { checkedCodes } from './generate.service.js';
import type { LicensePatch } from './keys.requests.js';
import { durationMs, licenseHash } from './license-keys.js';
import type { StatusFilter } from './license-status.js';
import { actorOf, keysPolicy, requirePermission, resellerScope } from '../access/index.js';
import type { AccountRepository, Principal } from '../access/index.js';
import { normalizeHwid } from '../client/index.js';

const USER_LIST_LIMIT = 2000;

export const TIMESERIES_METRICS = [
  'activations',
  'logins',
  'beats',
  'new_users',
] as const satisfies readonly TimeseriesMetric[];

interface SeriesQuery {
  bucket: 'hour' | 'day';
  from?: Date;
  to?: Date;
}

/** The activation module's offline files, as key administration calls them (a port compose.ts fills). */
export interface OfflineIssuer {
  offlineForKey(
    app: { id: string; hwidLock: boolean; maxDevices: number; offlineDays: number },
    licenseId: string,
    hwid: string,
    user: string | null,
    ip: string,
  ): Promise<{ file: string; resellerId: string | null }>;
}

/** What key and user administration uses, besides its repository (one composition root: compose.ts). */
interface KeysAdminDeps {
  audit: AuditRepository;
  accounts: Pick<AccountRepository, 'subtreeIds'>;
  /** LICENSE_HASH_KEY: a pasted full key is found through its keyed hash (docs/protocol.md 15.1). */
  licenseHashKey: Buffer;
  now: () => number;
  devices: Pick<DeviceRepository, 'of' | 'remove'>;
  /** Offline license files for air-gapped machines (docs/protocol.md 12.5); the activation module binds and signs. */
  offline: OfflineIssuer;
  webhooks: Pick<WebhookService, 'notify'>;
}

export class KeysAdminService {
  constructor(
    private readonly d: KeysAdminDeps,
    private readonly repo: KeyAdminRepository,
    private readonly apps: AppsService,
    private readonly events: EventBus,
  ) {}

  private now(): Date {
    return new Date(this.d.now());
  }

  /** docs/protocol.md 11.9: owners and developers see every record; admins and resellers their subtree's. */
  scope(p: Principal): Promise<ResellerScope> {
    return resellerScope(this.d.accounts, p);
  }

  private inScope(scope: ResellerScope, resellerId: string | null): boolean {
    return scope === undefined || (resellerId !== null && scope.includes(resellerId));
  }

  /** The key if it exists in an app the caller sees and inside the caller's scope; else 404 (also a port). */
  async license(p: Principal, id: string): Promise<{ row: LicenseRow; scope: ResellerScope }> {
    const row = await this.repo.findLicense(id);
    if (!row) throw new AppError('license_not_found');
    await this.apps.visible(p, row.app_id).catch((err: unknown) => {
      // An API token limited to other apps is told so (403); otherwise the record does not exist for the caller.
      throw err instanceof AppError && err.code === 'token_scope' ? err : new AppError('license_not_found');
    });
    const scope = await this.scope(p);
    if (!this.inScope(scope, row.reseller_id)) throw new AppError('license_not_found');
    return { row, scope };
  }

  private async user(p: Principal, id: string): Promise<UserRow> {
    const row = await this.repo.findUser(id);
    if (!row) throw new AppError('user_not_found');
    await this.apps.visible(p, row.app_id).catch((err: unknown) => {
      // An API token limited to other apps is told so (403); otherwise the record does not exist for the caller.
      throw err instanceof AppError && err.code === 'token_scope' ? err : new AppError('user_not_found');
    });
    if (!this.inScope(await this.scope(p), row.reseller_id)) throw new AppError('user_not_found');
    return row;
  }

  private record(
    p: Principal,
    appId: string,
    kind: string,
    detail: string,
    data: Record<string, unknown>,
    resellerId: string | null,
    level: 'info' | 'warning' = 'info',
  ) {
    this.d.audit.write({ appId, action: kind, detail, actor: actorOf(p), resellerId, level });
    return this.events.publish(kind, appId, data, resellerId);
  }

  async listLicenses(
    p: Principal,
    appId: string,
    q: { status?: StatusFilter; q?: string; limit?: number; cursor?: string },
  ) {
    requirePermission(p, 'view_keys');
    await this.apps.visible(p, appId);
    const limit = q.limit ?? 100;
    const rows = await this.repo.listLicenses({
      appId,
      scope: await this.scope(p),
      status: q.status,
      q: q.q,
      keyHash: q.q ? licenseHash(this.d.licenseHashKey, q.q) : undefined,
      limit,
      cursor: decodeCursor(q.cursor),
      now: this.now(),
    });
    const last = rows[rows.length - 1];
    return {
      rows: await this.withDevices(rows),
      nextCursor: rows.length === limit && last ? encodeCursor(last) : null,
    };
  }

  /**
   * The keys a bulk job acts on (docs/api.md "Bulk jobs"): those the key listing would show the caller
   * with these filters, or those among `ids` in the app and the caller's scope; newest first.
   */
  async matchingLicenses(
    p: Principal,
    appId: string,
    f: { status?: StatusFilter | undefined; q?: string | undefined; ids?: readonly string[] | undefined },
  ): Promise<{ id: string; key_preview: string }[]> {
    requirePermission(p, 'view_keys');
    await this.apps.visible(p, appId);
    return this.repo.matchingIds({
      appId,
      scope: await this.scope(p),
      status: f.status,
      q: f.q,
      keyHash: f.q ? licenseHash(this.d.licenseHashKey, f.q) : undefined,
      ids: f.ids,
      now: this.now(),
    });
  }

  /**
   * Key rows with their holder's devices (docs/protocol.md 12.1): a license-only key's own, a registered
   * key's end user's.
   */
  async withDevices(rows: LicenseRow[]): Promise<LicenseRow[]> {
    const userIds = rows.flatMap((r) => (r.user_id ? [r.user_id] : []));
    const [byKey, byUser] = await Promise.all([
      this.d.devices.of(
        'key',
        rows.filter((r) => !r.user_id).map((r) => r.id),
      ),
      this.d.devices.of('user', userIds),
    ]);
    return rows.map((r) => ({ ...r, devices: (r.user_id ? byUser.get(r.user_id) : byKey.get(r.id)) ?? [] }));
  }

  private async withDevice(row: LicenseRow): Promise<LicenseRow> {
    return (await this.withDevices([row]))[0]!;
  }

  /** docs/protocol.md 15.2: level, note, max_devices, entitlements (resellers in scope need generate_keys). */
  async update(p: Principal, id: string, patch: LicensePatch): Promise<LicenseRow> {
    keysPolicy.assertEdit(p);
    const { row } = await this.license(p, id);
    const entitlements =
      patch.entitlements === undefined ? undefined : await checkedCodes(this.apps, row.app_id, patch.entitlements);
    await this.repo.updateLicense(id, {
      ...(patch.level !== undefined ? { level: patch.level } : {}),
      ...(patch.note !== undefined ? { note: patch.note } : {}),
      ...(patch.max_devices !== undefined ? { maxDevices: patch.max_devices } : {}),
      ...(patch.max_sessions !== undefined ? { maxSessions: patch.max_sessions } : {}),
      ...(entitlements !== undefined ? { entitlements } : {}),
    });
    const changes: Record<string, unknown> = { ...patch, ...(entitlements ? { entitlements } : {}) };
    await this.record(
      p,
      row.app_id,
      'license.update',
      `Key ${row.key_preview} changed: ${Object.keys(patch).join(', ')}`,
      { license_id: id, changes },
      row.reseller_id,
    );
    this.d.webhooks.notify(row.app_id, row.reseller_id, 'license.update', { license_id: id, changes });
    return this.withDevice((await this.repo.findLicense(id))!);
  }

  /**
   * docs/protocol.md 12.1: one device off a key (needs reset_hwid); 404 `Device not found` when it holds none
   * such. The live event ends the sessions activated from that device on every worker (the heartbeat
   * owner kills them, channel clients get `revoked`); the key's other devices go on.
   */
  async removeLicenseDevice(p: Principal, id: string, hwid: string): Promise<void> {
    requirePermission(p, 'reset_hwid');
    const { row } = await this.license(p, id);
    const h = normalizeHwid(hwid);
    const removed = row.user_id
      ? await this.d.devices.remove('user', row.user_id, h)
      : await this.d.devices.remove('key', id, h);
    if (!removed) throw new AppError('device_not_found');
    await this.record(
      p,
      row.app_id,
      'license.device_remove',
      `A device removed from key ${row.key_preview}`,
      { license_id: id, hwid: h },
      row.reseller_id,
    );
  }

  /** One device off an end user; like removeLicenseDevice, only the sessions activated from it end. */
  async removeUserDevice(p: Principal, id: string, hwid: string): Promise<void> {
    requirePermission(p, 'reset_hwid');
    const u = await this.user(p, id);
    const h = normalizeHwid(hwid);
    if (!(await this.d.devices.remove('user', id, h))) throw new AppError('device_not_found');
    await this.record(
      p,
      u.app_id,
      'user.device_remove',
      `A device removed from user ${u.username}`,
      { user_id: id, hwid: h },
      u.reseller_id,
    );
  }

  /**
   * docs/protocol.md 12.5: an offline file for an air-gapped machine (owners, admins, developers; resellers in
   * scope with generate_keys). The HWID is bound like a license-only activation; audit `license.offline`.
   */
  async issueOffline(p: Principal, id: string, hwid: string): Promise<{ license_file: string; row: LicenseRow }> {
    keysPolicy.assertEdit(p);
    const { row } = await this.license(p, id);
    const app = await this.apps.visible(p, row.app_id);
    const { file } = await this.d.offline.offlineForKey(
      { id: app.id, hwidLock: app.hwidLock, maxDevices: app.maxDevices, offlineDays: app.offlineDays },
      id,
      hwid,
      row.user_id ? row.used_by : null,
      row.ip,
    );
    const h = normalizeHwid(hwid);
    await this.record(
      p,
      row.app_id,
      'license.offline',
      `Offline license file issued for key ${row.key_preview} (${app.offlineDays} days)`,
      { license_id: id, hwid: h, offline_days: app.offlineDays },
      row.reseller_id,
    );
    this.d.webhooks.notify(row.app_id, row.reseller_id, 'license.offline', {
      license_id: id,
      hwid: h,
      offline_days: app.offlineDays,
    });
    return { license_file: file, row: await this.withDevice((await this.repo.findLicense(id))!) };
  }

  /** Extend or subtract time: owners, admins and developers; never lifetime or never-activated keys. */
  async extend(p: Principal, id: string, value: number, unit: Exclude<DurationUnit, 'lifetime'>, subtract: boolean) {
    keysPolicy.assertChangeTime(p);
    const { row } = await this.license(p, id);
    if (row.duration_unit === 'lifetime' || row.duration_days === 0) throw new AppError('license_lifetime');
    if (!row.expires_at) throw new AppError('license_not_activated');
    const delta = durationMs(value, unit)! * (subtract ? -1 : 1);
    const shifted = await this.repo.shiftExpiry(id, delta);
    if (shifted === 'out_of_range') throw outOfRange();
    const expiresAt = toDate(shifted);
    await this.record(
      p,
      row.app_id,
      'license.extend',
      `${subtract ? 'Subtracted' : 'Added'} ${value} ${unit} ${subtract ? 'from' : 'to'} key ${row.key_preview}`,
      { license_id: id, expires_at: expiresAt?.toISOString() ?? null },
      row.reseller_id,
    );
    return { ...row, expires_at: expiresAt };
  }

  async extendAll(p: Principal, appId: string, value: number, unit: Exclude<DurationUnit, 'lifetime'>) {
    keysPolicy.assertChangeTime(p);
    await this.apps.visible(p, appId);
    const result = await this.repo.extendActive(appId, await this.scope(p), durationMs(value, unit)!, this.now());
    if (result === 'out_of_range') throw outOfRange();
    await this.record(
      p,
      appId,
      'license.bulk_extend',
      `Extended ${result.extended} active keys by ${value} ${unit} (${result.skipped} skipped)`,
      { ...result, value, unit },
      null,
    );
    return result;
  }

  async resetLicenseHwid(p: Principal, id: string): Promise<void> {
    requirePermission(p, 'reset_hwid');
    const { row } = await this.license(p, id);
    await this.repo.resetLicenseHwid(id);
    await this.record(
      p,
      row.app_id,
      'license.reset_hwid',
      `HWID reset on key ${row.key_preview}`,
      { license_id: id },
      row.reseller_id,
    );
  }

  /** `banned` absent toggles (docs/protocol.md 9). */
  async banLicense(p: Principal, id: string, banned: boolean | undefined) {
    requirePermission(p, 'ban_unban_keys');
    const { row } = await this.license(p, id);
    const target = banned ?? row.status !== 'banned';
    const status = await this.repo.setLicenseBanned(id, target);
    await this.record(
      p,
      row.app_id,
      'license.ban',
      `Key ${row.key_preview} ${target ? 'banned' : 'unbanned'}`,
      { license_id: id, banned: target, status: status ?? row.status },
      row.reseller_id,
      target ? 'warning' : 'info',
    );
    return { ...row, status: status ?? row.status };
  }

  /** A key's own settings (docs/protocol.md 12): owners, admins, developers; a reseller in scope with generate_keys. */
  async deleteLicense(p: Principal, id: string): Promise<void> {
    requirePermission(p, 'delete_keys');
    const { row } = await this.license(p, id);
    await this.repo.deleteLicense(id);
    await this.record(
      p,
      row.app_id,
      'license.delete',
      `Key ${row.key_preview} deleted`,
      { license_id: id, user_id: row.user_id },
      row.reseller_id,
      'warning',
    );
  }

  /**
   * End users, newest first. Without `limit` or `cursor` at most 2,000 (docs/spec.md); with them, cursor pages
   * reaching every user (docs/protocol.md 15.1). `q` matches the username or the bound key's preview.
   */
  async listUsers(p: Principal, appId: string, q: { q?: string; limit?: number; cursor?: string } = {}) {
    requirePermission(p, 'view_keys');
    await this.apps.visible(p, appId);
    const limit = q.limit ?? USER_LIST_LIMIT;
    const rows = await this.repo.listUsers({
      appId,
      scope: await this.scope(p),
      q: q.q,
      keyHash: q.q ? licenseHash(this.d.licenseHashKey, q.q) : undefined,
      limit,
      cursor: decodeCursor(q.cursor),
    });
    const devices = await this.d.devices.of(
      'user',
      rows.map((u) => u.id),
    );
    const withDevices = rows.map((u) => ({ ...u, devices: devices.get(u.id) ?? [] }));
    const last = rows[rows.length - 1];
    return { rows: withDevices, nextCursor: rows.length === limit && last ? encodeCursor(last) : null };
  }

  async resetUserHwid(p: Principal, id: string): Promise<void> {
    requirePermission(p, 'reset_hwid');
    const u = await this.user(p, id);
    await this.repo.resetUserHwid(id);
    await this.record(
      p,
      u.app_id,
      'user.reset_hwid',
      `HWID reset for user ${u.username}`,
      { user_id: id },
      u.reseller_id,
    );
  }

  async banUser(p: Principal, id: string, banned: boolean): Promise<void> {
    requirePermission(p, 'freeze_unfreeze');
    const u = await this.user(p, id);
    await this.repo.setUserBanned(id, banned);
    await this.record(
      p,
      u.app_id,
      'user.ban',
      `User ${u.username} ${banned ? 'banned' : 'unbanned'}`,
      { user_id: id, banned },
      u.reseller_id,
      banned ? 'warning' : 'info',
    );
  }

  async deleteUser(p: Principal, id: string): Promise<void> {
    requirePermission(p, 'delete_keys');
    const u = await this.user(p, id);
    await this.repo.deleteUser(id);
    await this.record(
      p,
      u.app_id,
      'user.delete',
      `User ${u.username} deleted; key kept`,
      { user_id: id, license_id: u.license_id },
      u.reseller_id,
      'warning',
    );
  }

  /**
   * A chart's points (view_stats): one per hour or UTC day in [from, to), zeros included, counting what
   * the caller's scope holds. At most 2,000 points; from defaults to 30 days (day) or 48 hours (hour) before to.
   */
  async timeseries(p: Principal, appId: string, q: SeriesQuery & { metric: TimeseriesMetric }) {
    requirePermission(p, 'view_stats');
    await this.apps.visible(p, appId);
    const { start, end, step } = this.range(q, 2000);
    const counts = await this.repo.timeseries(
      [appId],
      await this.scope(p),
      q.metric,
      q.bucket,
      new Date(start),
      new Date(end),
    );
    const of = counts.get(appId)!;
    const points: { t: string; n: number }[] = [];
    for (let t = start; t < end; t += step) points.push({ t: new Date(t).toISOString(), n: of.get(t) ?? 0 });
    return { metric: q.metric, bucket: q.bucket, points };
  }

  /**
   * Every metric of every application the caller sees (view_stats), on one time axis of at most 400
   * buckets (default: the last 30 days, or 48 hours): per application its totals and its series, counting
   * what the caller's scope holds. An API token sees the applications it is limited to.
   */
  async overview(p: Principal, q: SeriesQuery) {
    requirePermission(p, 'view_stats');
    const { start, end, step } = this.range(q, 400);
    const apps = await this.apps.list(p);
    const ids = apps.map((a) => a.id);
    const scope = await this.scope(p);
    const byMetric = new Map<TimeseriesMetric, Map<string, Map<number, number>>>();
    for (const m of TIMESERIES_METRICS)
      byMetric.set(m, await this.repo.timeseries(ids, scope, m, q.bucket, new Date(start), new Date(end)));
    const t: string[] = [];
    for (let at = start; at < end; at += step) t.push(new Date(at).toISOString());
    return {
      bucket: q.bucket,
      t,
      apps: apps.map((a) => {
        const series = {} as Record<TimeseriesMetric, number[]>;
        const totals = {} as Record<TimeseriesMetric, number>;
        for (const m of TIMESERIES_METRICS) {
          const of = byMetric.get(m)!.get(a.id)!;
          series[m] = t.map((_, i) => of.get(start + i * step) ?? 0);
          totals[m] = series[m].reduce((x, y) => x + y, 0);
        }
        return { id: a.id, name: a.name, totals, series };
      }),
    };
  }

  /** [start, end) in whole buckets; 422 on `from` when empty or longer than `max` buckets. */
  private range(q: SeriesQuery, max: number) {
    const step = q.bucket === 'hour' ? 3_600_000 : 86_400_000;
    const to = q.to ?? this.now();
    const end = Math.floor(to.getTime() / step) * step + step;
    const start = Math.floor((q.from?.getTime() ?? end - (q.bucket === 'hour' ? 48 : 30) * step) / step) * step;
    if (start >= end || (end - start) / step > max)
      throw new ValidationError([
        {
          loc: ['query', 'from'],
          msg: `from must be before to, and at most ${max.toLocaleString('en')} buckets apart`,
          type: 'value_error',
        },
      ]);
    return { start, end, step };
  }

  async stats(p: Principal, appId: string, liveSessions: number) {
    requirePermission(p, 'view_stats');
    await this.apps.visible(p, appId);
    const scope = await this.scope(p);
    const now = this.now();
    const [keys, users, logins] = await Promise.all([
      this.repo.keyStats(appId, scope, now),
      this.repo.userCount(appId, scope),
      this.repo.logins24h(appId, scope, new Date(now.getTime() - 86_400_000)),
    ]);
    return { keys, users, live_sessions: liveSessions, logins_24h: logins };
  }
}

/** docs/protocol.md 11.25: an extend whose result would leave the storable range is refused on `value`. */
function outOfRange(): ValidationError {
  return validationError('value', 'The new expiry would be past 9999-12-31 (or before 1970)', 'value_error');
}

/** A listing position: the last row's created_at (to the microsecond when the query gave it) and id. */
function encodeCursor(r: { created_at: Date | string; id: string; cursor_at?: string }): string {
  const at = r.cursor_at ?? toDate(r.created_at)!.toISOString();
  return Buffer.from(JSON.stringify([at, r.id])).toString('base64url');
}

const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3,6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A listing cursor back to a position; anything that is not exactly what encodeCursor writes
 * (docs/protocol.md 11.25) is 422 on `cursor`, never passed on to PostgreSQL casts.
 */
function decodeCursor(c: string | undefined): { createdAt: string; id: string } | undefined {
  if (!c) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(c, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (Array.isArray(parsed) && parsed.length === 2) {
    const [createdAt, id] = parsed as unknown[];
    if (
      typeof createdAt === 'string' &&
      typeof id === 'string' &&
      CURSOR_TIME.test(createdAt) &&
      !Number.isNaN(Date.parse(createdAt)) &&
      UUID.test(id)
    )
      return { createdAt, id };
  }
  throw new ValidationError([{ loc: ['query', 'cursor'], msg: 'Invalid cursor', type: 'value_error' }]);
}
