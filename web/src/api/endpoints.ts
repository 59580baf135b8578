// Every call the dashboard makes, typed on both sides: the request by the generated OpenAPI paths,
// the answer by responses.ts (checked against the real server by test/web/api-contract.test.ts).
import { api, unwrap } from './client.js';
import { ApiError, apiError } from './errors.js';
import type { paths } from './schema.js';
import type {
  Account,
  ApiToken,
  App,
  AuditEntry,
  Ban,
  CreatedToken,
  Credentials,
  EndUser,
  Entitlements,
  OfflineActivation,
  OfflineFile,
  SeatPool,
  Generated,
  ImportResult,
  License,
  LicensePage,
  LogEntry,
  Me,
  SecurityState,
  SignIn,
  Overview,
  Stats,
  Timeseries,
  TwoFactorSetup,
  WebhookDelivery,
  Job,
} from './responses.js';

type Body<P extends keyof paths, M extends 'post' | 'patch' | 'put'> = paths[P][M] extends {
  requestBody: { content: { 'application/json': infer B } };
}
  ? B
  : never;
type Query<P extends keyof paths> = paths[P]['get'] extends { parameters: { query?: infer Q } }
  ? NonNullable<Q>
  : never;

export type AppPatch = Body<'/api/apps/{id}', 'patch'>;
export type AppCreate = Body<'/api/apps', 'post'>;
export type GenerateInput = Body<'/api/apps/{id}/licenses', 'post'>;
export type ExtendInput = Body<'/api/licenses/{id}/extend', 'post'>;
export type TeamCreate = Body<'/api/team', 'post'>;
export type TeamPatch = Body<'/api/team/{id}', 'patch'>;
export type SubscriptionInput = Body<'/api/team/{id}/subscription', 'patch'>;
export type PermissionsInput = Body<'/api/team/{id}/permissions', 'patch'>['permissions'];
export type LicensePatch = Body<'/api/licenses/{id}', 'patch'>;
export type LicenseQuery = Query<'/api/apps/{id}/licenses'>;
export type LogQuery = Query<'/api/apps/{id}/logs'>;
export type BanInput = Body<'/api/apps/{id}/bans', 'post'>;
export type TokenInput = Body<'/api/tokens', 'post'>;
export type TokenScope = TokenInput['scopes'][number];
export type AuditQuery = Query<'/api/audit'>;

const id = (v: string) => ({ params: { path: { id: v } } });

export const auth = {
  /** `otp`: a TOTP code or a recovery code, when the account has two-factor sign-in on. */
  login: (username: string, password: string, otp?: string) =>
    unwrap<{ token: string; account: Account }>(
      api.POST('/api/auth/login', { body: { username, password, ...(otp ? { otp } : {}) } }),
    ),
  logout: () => unwrap<unknown>(api.POST('/api/auth/logout')),
  me: () => unwrap<Me>(api.GET('/api/auth/me')),
  changePassword: (current_password: string, password: string) =>
    unwrap<unknown>(api.POST('/api/auth/password', { body: { current_password, password } })),
};

export const apps = {
  list: () => unwrap<App[]>(api.GET('/api/apps')),
  get: (appId: string) => unwrap<App>(api.GET('/api/apps/{id}', id(appId))),
  create: (body: AppCreate) => unwrap<App>(api.POST('/api/apps', { body })),
  update: (appId: string, body: AppPatch) => unwrap<App>(api.PATCH('/api/apps/{id}', { ...id(appId), body })),
  remove: (appId: string) => unwrap<unknown>(api.DELETE('/api/apps/{id}', id(appId))),
  rotateSecret: (appId: string) => unwrap<App>(api.POST('/api/apps/{id}/rotate-secret', id(appId))),
  setHashes: (appId: string, hashes: string[]) =>
    unwrap<App>(api.PUT('/api/apps/{id}/hashes', { ...id(appId), body: { hashes } })),
  entitlements: (appId: string) => unwrap<Entitlements>(api.GET('/api/apps/{id}/entitlements', id(appId))),
  setEntitlements: (appId: string, entitlements: Entitlements['entitlements']) =>
    unwrap<Entitlements>(api.PUT('/api/apps/{id}/entitlements', { ...id(appId), body: { entitlements } })),
  credentials: (appId: string) => unwrap<Credentials>(api.GET('/api/apps/{id}/credentials', id(appId))),
  stats: (appId: string) => unwrap<Stats>(api.GET('/api/apps/{id}/stats', id(appId))),
  timeseries: (appId: string, query: Query<'/api/apps/{id}/timeseries'>) =>
    unwrap<Timeseries>(api.GET('/api/apps/{id}/timeseries', { params: { path: { id: appId }, query } })),
  overview: (query: Query<'/api/overview'>) => unwrap<Overview>(api.GET('/api/overview', { params: { query } })),
  logs: (appId: string, query: LogQuery) =>
    unwrap<LogEntry[]>(api.GET('/api/apps/{id}/logs', { params: { path: { id: appId }, query } })),
  bans: (appId: string) => unwrap<Ban[]>(api.GET('/api/apps/{id}/bans', id(appId))),
  addBan: (appId: string, body: BanInput) => unwrap<Ban>(api.POST('/api/apps/{id}/bans', { ...id(appId), body })),
  removeBan: (banId: string) => unwrap<unknown>(api.DELETE('/api/bans/{id}', id(banId))),
  /**
   * A CSV export (licenses, users or logs) with the listing's filters: a plain GET the browser downloads
   * itself, streamed by the server (the cookie authenticates it).
   */
  exportUrl: (appId: string, what: 'licenses' | 'users' | 'logs', filters: Record<string, string | undefined>) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    const qs = q.toString();
    return `/api/apps/${encodeURIComponent(appId)}/${what}/export.csv${qs ? `?${qs}` : ''}`;
  },
  /** The SDK archive is a plain GET the browser downloads itself (the cookie authenticates it). */
  sdkUrl: (appId: string, lang: string) => `/api/apps/${encodeURIComponent(appId)}/sdk/${encodeURIComponent(lang)}`,
};

export type ProductInput = Body<'/api/apps/{id}/products', 'post'>;

/** A product as its managers see it (docs/protocol.md 14.4). */
export interface Product {
  id: string;
  name: string;
  duration: number | null;
  unit: string;
  level: number;
  mask: string;
  alphabet: string;
  entitlements: string[];
  note: string;
  webhook_secret: string;
  stripe_webhook_path: string;
  dynamic_webhook_path: string;
  created_at: string;
}

/** An order on the dashboard: keys by preview only. */
export interface Order {
  id: string;
  product_name: string;
  provider: string;
  external_id: string;
  email: string;
  keys: { license_id: string; key_preview: string | null }[];
  created_at: string;
}

export const products = {
  list: (appId: string) => unwrap<Product[]>(api.GET('/api/apps/{id}/products', id(appId))),
  create: (appId: string, body: ProductInput) =>
    unwrap<Product>(api.POST('/api/apps/{id}/products', { ...id(appId), body })),
  remove: (productId: string) => unwrap<unknown>(api.DELETE('/api/products/{id}', id(productId))),
  rotateSecret: (productId: string) => unwrap<Product>(api.POST('/api/products/{id}/rotate-secret', id(productId))),
  orders: (appId: string) => unwrap<Order[]>(api.GET('/api/apps/{id}/orders', id(appId))),
};

export type ReleaseInput = Body<'/api/apps/{id}/releases', 'post'>;

/** An artifact of a release (docs/releases.md). */
export interface Artifact {
  id: string;
  filename: string;
  platform: string;
  arch: string;
  size: number;
  sha256: string;
  sha512: string;
  downloads: number;
}

/** A release with its artifacts and download counts. */
export interface Release {
  id: string;
  version: string;
  channel: string;
  notes: string;
  entitlements: string[];
  status: 'draft' | 'published' | 'yanked';
  created_at: string;
  published_at: string | null;
  yanked_at: string | null;
  downloads: number;
  artifacts: Artifact[];
}

export const releases = {
  list: (appId: string) => unwrap<Release[]>(api.GET('/api/apps/{id}/releases', id(appId))),
  create: (appId: string, body: ReleaseInput) =>
    unwrap<Release>(api.POST('/api/apps/{id}/releases', { ...id(appId), body })),
  publish: (releaseId: string) => unwrap<Release>(api.POST('/api/releases/{id}/publish', id(releaseId))),
  yank: (releaseId: string) => unwrap<Release>(api.POST('/api/releases/{id}/yank', id(releaseId))),
  remove: (releaseId: string) => unwrap<unknown>(api.DELETE('/api/releases/{id}', id(releaseId))),
  /**
   * The raw file as a streamed PUT (never base64 in JSON): XMLHttpRequest, because fetch reports no
   * upload progress. `onProgress` gets the share sent, 0 to 1.
   */
  upload: (
    releaseId: string,
    file: File,
    target: { platform: string; arch: string },
    onProgress: (f: number) => void,
  ) =>
    new Promise<Artifact>((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      const q = new URLSearchParams(target);
      xhr.open('PUT', `/api/releases/${encodeURIComponent(releaseId)}/artifacts/${encodeURIComponent(file.name)}?${q}`);
      xhr.withCredentials = true;
      xhr.setRequestHeader('Content-Type', 'application/octet-stream');
      xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
      xhr.onload = () => {
        let body: unknown;
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          body = undefined;
        }
        if (xhr.status === 201) resolve(body as Artifact);
        else reject(apiError(xhr.status, xhr.statusText, body, xhr.getResponseHeader('retry-after')));
      };
      xhr.onerror = () =>
        reject(new ApiError(0, 'The server could not be reached. Check your connection and try again.'));
      xhr.send(file);
    }),
  downloadUrl: (releaseId: string, filename: string) =>
    `/api/releases/${encodeURIComponent(releaseId)}/artifacts/${encodeURIComponent(filename)}`,
};

export const licenses = {
  list: (appId: string, query: LicenseQuery) =>
    unwrap<LicensePage>(api.GET('/api/apps/{id}/licenses', { params: { path: { id: appId }, query } })),
  generate: (appId: string, body: GenerateInput) =>
    unwrap<Generated>(api.POST('/api/apps/{id}/licenses', { ...id(appId), body })),
  extend: (licenseId: string, body: ExtendInput) =>
    unwrap<License>(api.POST('/api/licenses/{id}/extend', { ...id(licenseId), body })),
  extendAll: (appId: string, body: Body<'/api/apps/{id}/licenses/extend-all', 'post'>) =>
    unwrap<{ extended: number; skipped: number }>(
      api.POST('/api/apps/{id}/licenses/extend-all', { ...id(appId), body }),
    ),
  resetHwid: (licenseId: string) => unwrap<unknown>(api.POST('/api/licenses/{id}/reset-hwid', id(licenseId))),
  setBanned: (licenseId: string, banned: boolean) =>
    unwrap<License>(api.PATCH('/api/licenses/{id}/ban', { ...id(licenseId), body: { banned } })),
  remove: (licenseId: string) => unwrap<unknown>(api.DELETE('/api/licenses/{id}', id(licenseId))),
  update: (licenseId: string, body: LicensePatch) =>
    unwrap<License>(api.PATCH('/api/licenses/{id}', { ...id(licenseId), body })),
  removeDevice: (licenseId: string, hwid: string) =>
    unwrap<unknown>(api.DELETE('/api/licenses/{id}/devices/{hwid}', { params: { path: { id: licenseId, hwid } } })),
  offline: (licenseId: string, hwid: string) =>
    unwrap<OfflineFile>(api.POST('/api/licenses/{id}/offline', { ...id(licenseId), body: { hwid } })),
  /** An air-gapped machine's activation request (kwreq1.) answered with its license file (docs/air-gapped.md). */
  answerRequest: (appId: string, request: string) =>
    unwrap<OfflineActivation>(api.POST('/api/apps/{id}/offline-activations', { ...id(appId), body: { request } })),
  /** A signed seat pool (kwpool1.) for `keywarden relay`. */
  pool: (licenseId: string, body: Body<'/api/licenses/{id}/pools', 'post'>) =>
    unwrap<SeatPool>(api.POST('/api/licenses/{id}/pools', { ...id(licenseId), body })),
  /** docs/protocol.md 15.6; `dryRun` reports what would be imported and skipped without writing. */
  import: (appId: string, body: Body<'/api/apps/{id}/licenses/import', 'post'>, dryRun: boolean) =>
    unwrap<ImportResult>(
      api.POST('/api/apps/{id}/licenses/import', {
        params: { path: { id: appId }, query: { dry_run: dryRun ? 'true' : 'false' } },
        body,
      }),
    ),
};

/** Bulk jobs (docs/api.md "Bulk jobs"): one request for an action over many keys. */
export const jobs = {
  start: (appId: string, body: Body<'/api/apps/{id}/jobs', 'post'>) =>
    unwrap<Job>(api.POST('/api/apps/{id}/jobs', { ...id(appId), body })),
  get: (jobId: string) => unwrap<Job>(api.GET('/api/jobs/{id}', id(jobId))),
  cancel: (jobId: string) => unwrap<Job>(api.POST('/api/jobs/{id}/cancel', id(jobId))),
};

export const users = {
  list: (appId: string) => unwrap<EndUser[]>(api.GET('/api/apps/{id}/users', id(appId))),
  /** One cursor page, searched on the server (username, key preview or the full key). */
  page: (appId: string, query: { limit: number; q?: string; cursor?: string }) =>
    unwrap<{ items: EndUser[]; next_cursor: string | null }>(
      api.GET('/api/apps/{id}/users', { params: { path: { id: appId }, query } }),
    ),
  resetHwid: (userId: string) => unwrap<unknown>(api.POST('/api/users/{id}/reset-hwid', id(userId))),
  removeDevice: (userId: string, hwid: string) =>
    unwrap<unknown>(api.DELETE('/api/users/{id}/devices/{hwid}', { params: { path: { id: userId, hwid } } })),
  setBanned: (userId: string, banned: boolean) =>
    unwrap<unknown>(api.PATCH('/api/users/{id}/ban', { ...id(userId), body: { banned } })),
  remove: (userId: string) => unwrap<unknown>(api.DELETE('/api/users/{id}', id(userId))),
};

export const team = {
  list: () => unwrap<Account[]>(api.GET('/api/team')),
  create: (body: TeamCreate) => unwrap<Account>(api.POST('/api/team', { body })),
  update: (memberId: string, body: TeamPatch) =>
    unwrap<Account>(api.PATCH('/api/team/{id}', { ...id(memberId), body })),
  remove: (memberId: string) =>
    unwrap<{ success: boolean; adopted_children: number }>(api.DELETE('/api/team/{id}', id(memberId))),
  setPermissions: (memberId: string, permissions: PermissionsInput) =>
    unwrap<Account>(api.PATCH('/api/team/{id}/permissions', { ...id(memberId), body: { permissions } })),
  setApps: (memberId: string, allowed_apps: string[]) =>
    unwrap<Account>(api.PATCH('/api/team/{id}/apps', { ...id(memberId), body: { allowed_apps } })),
  addCredits: (memberId: string, amount: number) =>
    unwrap<Account>(api.POST('/api/team/{id}/credits', { ...id(memberId), body: { amount } })),
  setSubscription: (memberId: string, body: SubscriptionInput) =>
    unwrap<Account>(api.PATCH('/api/team/{id}/subscription', { ...id(memberId), body })),
  setPassword: (memberId: string, password: string) =>
    unwrap<unknown>(api.POST('/api/team/{id}/password', { ...id(memberId), body: { password } })),
  setWebhook: (memberId: string, webhook: string) =>
    unwrap<Account>(api.PATCH('/api/team/{id}/webhook', { ...id(memberId), body: { webhook } })),
  setOwnWebhook: (webhook: string) => unwrap<Account>(api.PATCH('/api/account/webhook', { body: { webhook } })),
  resetTwoFactor: (memberId: string) => unwrap<unknown>(api.DELETE('/api/team/{id}/2fa', id(memberId))),
};

export const twoFactor = {
  setup: () => unwrap<TwoFactorSetup>(api.POST('/api/auth/2fa/setup')),
  enable: (code: string) => unwrap<{ recovery_codes: string[] }>(api.POST('/api/auth/2fa/enable', { body: { code } })),
  disable: (password: string, code: string) =>
    unwrap<unknown>(api.POST('/api/auth/2fa/disable', { body: { password, code } })),
};

export const security = {
  state: () => unwrap<SecurityState>(api.GET('/api/account/security')),
  setPolicy: (require_two_factor: boolean) =>
    unwrap<{ require_two_factor: boolean }>(api.PATCH('/api/account/security', { body: { require_two_factor } })),
  signOutEverywhere: () => unwrap<{ revoked: number }>(api.DELETE('/api/account/sessions')),
  endSession: (sessionId: string) => unwrap<unknown>(api.DELETE('/api/account/sessions/{id}', id(sessionId))),
  signIns: () => unwrap<SignIn[]>(api.GET('/api/account/sign-ins')),
  audit: (query: AuditQuery) => unwrap<AuditEntry[]>(api.GET('/api/audit', { params: { query } })),
};

export const webhooks = {
  deliveries: (query: { account_id?: string; limit?: number; before?: string }) =>
    unwrap<WebhookDelivery[]>(api.GET('/api/account/webhook/deliveries', { params: { query } })),
  redeliver: (deliveryId: string) =>
    unwrap<WebhookDelivery>(api.POST('/api/webhook-deliveries/{id}/redeliver', id(deliveryId))),
};

export const tokens = {
  list: () => unwrap<ApiToken[]>(api.GET('/api/tokens')),
  create: (body: TokenInput) => unwrap<CreatedToken>(api.POST('/api/tokens', { body })),
  revoke: (tokenId: string) => unwrap<unknown>(api.DELETE('/api/tokens/{id}', id(tokenId))),
};
