// Releases and updates (docs/releases.md): releases on channels, artifacts signed with the active
// response-signing key, the client's upgrade check and its short-lived download links.
//
// Who may do what: owners, admins and developers manage releases; every member the app is visible
// to reads them and downloads their artifacts. An end user's copy reaches a release only through an
// activated client session, and a file only through a link the upgrade check handed out.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, validationError } from '../../errors.js';
import { ed25519Sign, responseEncryptionKey } from '../../platform/crypto/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import { BodyStreamError, type BodyStream } from '../../platform/http/body-stream.js';
import { fileReply } from '../../platform/http/file-reply.js';
import type { IncomingRequest, Reply } from '../../platform/http/types.js';
import { actorOf, releasesPolicy, type Principal } from '../access/index.js';
import type { AuditRepository } from '../audit/index.js';
import { outcome, type ClientCall, type ClientOutcome } from '../client/index.js';
import { checkedCodes } from '../keys/index.js';
import type { ArtifactStore } from './artifact-store.js';
import { DownloadLinks, LINK_TTL_MS } from './download-links.js';
import type { ArtifactRow, ReleaseRepository, ReleaseRow } from './releases.repository.js';
import {
  CHANNELS,
  FILENAME,
  type Channel,
  type ReleaseInput,
  type ReleasePatch,
  type UpgradeRequest,
} from './releases.requests.js';
import { compareSemVer, parseSemVer } from './semver.js';

/** What an update needs of a session's license (the activation module answers it). */
type LicenseStanding =
  | { state: 'deleted' | 'banned' }
  | { state: 'ok'; expiresAt: Date | null; entitlements: string[]; resellerId: string | null };

type StandingPort = (holder: { licenseId: string; userId: string | null }) => Promise<LicenseStanding>;

/** The application's rule for expired keys, read with the client's cached app row. */
type ExpiredUpdates = 'none' | 'maintain';

export interface ReleasesDeps {
  repo: ReleaseRepository;
  store: ArtifactStore;
  /** ARTIFACT_MAX_MB in bytes. */
  maxBytes: number;
  apps: {
    /** The app when the caller may see it; 404 otherwise. */
    visible(p: Principal, appId: string): Promise<unknown>;
    entitlementCodes(appId: string): Promise<Set<string>>;
    /** The expiry rule of an app (for links, which carry no client session). */
    expiredUpdates(appId: string): Promise<ExpiredUpdates | undefined>;
  };
  standing: StandingPort;
  audit: AuditRepository;
  events: { publish(kind: string, appId: string, data: Record<string, unknown>): Promise<void> };
  webhooks: { notify(appId: string, resellerId: string | null, event: string, data: Record<string, unknown>): void };
  signing: () => ResponseSigningKey;
  links: DownloadLinks;
  publicUrl: string | undefined;
  log: Logger;
  now: () => number;
}

const HOUR_MS = 3_600_000;
const rankOf = (c: Channel) => CHANNELS.indexOf(c);

/** The signed message of an artifact (docs/releases.md "Artifact signatures"). */
function artifactMessage(appId: string, version: string, filename: string, sha512: string): string {
  return `kwart1.${appId}.${version}.${filename}.${sha512}`;
}

/** Timestamps may come back from the driver as text. */
const ms = (d: Date | string) => new Date(d).getTime();

function iso(d: Date | string | null): string | null {
  return d === null ? null : new Date(d).toISOString();
}

function artifactView(a: ArtifactRow) {
  return {
    id: a.id,
    filename: a.filename,
    platform: a.platform,
    arch: a.arch,
    size: Number(a.size),
    sha256: a.sha256,
    sha512: a.sha512,
    signature: a.signature,
    kid: a.kid,
    downloads: Number(a.downloads),
    created_at: iso(a.created_at),
  };
}

function releaseView(r: ReleaseRow, artifacts: ArtifactRow[]) {
  const views = artifacts.map(artifactView);
  return {
    id: r.id,
    app_id: r.app_id,
    version: r.version,
    channel: r.channel,
    notes: r.notes,
    entitlements: r.entitlements,
    status: r.status,
    created_at: iso(r.created_at),
    published_at: iso(r.published_at),
    yanked_at: iso(r.yanked_at),
    downloads: views.reduce((n, a) => n + a.downloads, 0),
    artifacts: views,
  };
}

/** Highest SemVer precedence first (ties, equal but for build metadata, by creation). */
function byPrecedence(a: ReleaseRow, b: ReleaseRow): number {
  return compareSemVer(parseSemVer(b.version)!, parseSemVer(a.version)!) || ms(b.created_at) - ms(a.created_at);
}

/** How long an app's published releases are read from memory by upgrade checks. */
const SHELF_TTL_MS = 1000;
/** Applications whose releases are kept at once (the oldest goes first). */
const MAX_SHELVES = 10_000;

interface Shelf {
  releases: ReleaseRow[];
  artifacts: Map<string, ArtifactRow[]>;
}

export class ReleasesService {
  private readonly shelves = new Map<string, { at: number; shelf: Promise<Shelf> }>();

  constructor(private readonly d: ReleasesDeps) {}

  private async managed(p: Principal, appId: string): Promise<void> {
    await this.d.apps.visible(p, appId);
    releasesPolicy.assertManage(p);
  }

  /** A release of an app the caller sees (404 otherwise); with `manage`, only for managers. */
  private async release(p: Principal, id: string, manage: boolean): Promise<ReleaseRow> {
    const row = await this.d.repo.find(id);
    if (!row) throw new AppError('release_not_found');
    await this.d.apps.visible(p, row.app_id).catch((err: unknown) => {
      throw err instanceof AppError && err.code === 'token_scope' ? err : new AppError('release_not_found');
    });
    if (manage) releasesPolicy.assertManage(p);
    return row;
  }

  private async view(row: ReleaseRow) {
    return releaseView(row, await this.d.repo.artifacts([row.id]));
  }

  private audit(p: Principal, appId: string, action: string, detail: string): void {
    this.d.audit.write({ appId, action, detail, actor: actorOf(p) });
  }

  async create(p: Principal, appId: string, input: ReleaseInput) {
    await this.managed(p, appId);
    if (!parseSemVer(input.version))
      throw validationError('version', 'Version must be a SemVer 2.0 version', 'value_error');
    const entitlements = await checkedCodes(this.d.apps, appId, input.entitlements ?? []);
    const row = await this.d.repo.create(
      appId,
      {
        version: input.version,
        channel: input.channel ?? 'stable',
        notes: input.notes ?? '',
        entitlements,
        created_at: new Date(this.d.now()),
      },
      p.account.id,
    );
    this.audit(p, appId, 'release.create', `Release ${row.version} (${row.channel}) created`);
    return releaseView(row, []);
  }

  async list(p: Principal, appId: string) {
    await this.d.apps.visible(p, appId);
    const rows = (await this.d.repo.listForApp(appId)).sort(byPrecedence);
    const artifacts = await this.d.repo.artifacts(rows.map((r) => r.id));
    return rows.map((r) =>
      releaseView(
        r,
        artifacts.filter((a) => a.release_id === r.id),
      ),
    );
  }

  async get(p: Principal, id: string) {
    return this.view(await this.release(p, id, false));
  }

  async update(p: Principal, id: string, patch: ReleasePatch) {
    const row = await this.release(p, id, true);
    const entitlements = patch.entitlements && (await checkedCodes(this.d.apps, row.app_id, patch.entitlements));
    const updated = await this.d.repo.update(id, { ...patch, ...(entitlements ? { entitlements } : {}) });
    this.changed(row.app_id);
    if (!updated) throw new AppError('release_not_found');
    this.audit(p, row.app_id, 'release.update', `Release ${row.version} changed: ${Object.keys(patch).join(', ')}`);
    return this.view(updated);
  }

  async remove(p: Principal, id: string): Promise<void> {
    const row = await this.release(p, id, true);
    const files = await this.d.repo.artifactIdsOf(id);
    if (!(await this.d.repo.deleteDraft(id))) throw new AppError('release_published');
    await Promise.all(files.map((f) => this.d.store.discard(f)));
    this.audit(p, row.app_id, 'release.delete', `Release ${row.version} deleted`);
  }

  async publish(p: Principal, id: string) {
    const row = await this.release(p, id, true);
    if (row.status !== 'draft') throw new AppError('release_published');
    const artifacts = await this.d.repo.artifacts([id]);
    if (artifacts.length === 0)
      throw validationError('artifacts', 'A release needs at least one artifact to be published', 'value_error');
    const published = await this.d.repo.setStatus(id, 'draft', 'published', new Date(this.d.now()));
    this.changed(row.app_id);
    if (!published) throw new AppError('release_published');
    this.audit(p, row.app_id, 'release.publish', `Release ${row.version} (${row.channel}) published`);
    const data = { release_id: id, version: row.version, channel: row.channel };
    await this.d.events.publish('release.published', row.app_id, data);
    this.d.webhooks.notify(row.app_id, null, 'release.published', data);
    return releaseView(published, artifacts);
  }

  async yank(p: Principal, id: string) {
    const row = await this.release(p, id, true);
    const yanked =
      row.status === 'yanked' ? row : await this.d.repo.setStatus(id, row.status, 'yanked', new Date(this.d.now()));
    this.changed(row.app_id);
    if (!yanked) throw new AppError('release_published'); // its status moved meanwhile: ask again
    if (row.status !== 'yanked')
      this.audit(p, row.app_id, 'release.yank', `Release ${row.version} yanked (was ${row.status})`);
    return this.view(yanked);
  }

  /**
   * Receives an artifact: the body goes to disk as it arrives (hashed on the way), is signed, then
   * recorded; the same filename replaces the draft's earlier file.
   */
  async upload(
    p: Principal,
    id: string,
    filename: string,
    target: { platform?: string | undefined; arch?: string | undefined },
    body: BodyStream | undefined,
  ) {
    const row = await this.release(p, id, true);
    if (!FILENAME.test(filename))
      throw validationError(['path', 'filename'], 'Filename must be 1-255 of [A-Za-z0-9._-]');
    if (row.status !== 'draft') throw new AppError('release_published');
    if (!body) throw new AppError('payload_too_large');
    const upload = await this.d.store.receive(body).catch((err: unknown) => {
      throw err instanceof BodyStreamError ? new AppError('payload_too_large') : err;
    });
    const key = this.d.signing();
    const artifactId = randomUUID();
    const signature = ed25519Sign(
      Buffer.from(artifactMessage(row.app_id, row.version, filename, upload.sha512), 'utf8'),
      key.secretKey,
    ).toString('base64');
    await this.d.store.place(upload, artifactId);
    const put = await this.d.repo
      .putArtifact(
        id,
        {
          id: artifactId,
          filename,
          platform: target.platform ?? 'any',
          arch: target.arch ?? 'any',
          size: upload.size,
          sha256: upload.sha256,
          sha512: upload.sha512,
          signature,
          kid: key.kid,
        },
        new Date(this.d.now()),
      )
      .catch(async (err: unknown) => {
        await this.d.store.discard(artifactId);
        throw err;
      });
    if (!put) {
      await this.d.store.discard(artifactId);
      throw new AppError('release_published');
    }
    if (put.replaced) await this.d.store.discard(put.replaced);
    this.audit(
      p,
      row.app_id,
      'release.artifact',
      `Artifact ${filename} (${upload.size} bytes) added to ${row.version}`,
    );
    const { downloads: _none, created_at: _at, ...view } = artifactView(put.row);
    return view;
  }

  async removeArtifact(p: Principal, id: string, filename: string): Promise<void> {
    const row = await this.release(p, id, true);
    if (row.status !== 'draft') throw new AppError('release_published');
    const gone = await this.d.repo.deleteArtifact(id, filename);
    if (!gone) throw new AppError('artifact_not_found');
    await this.d.store.discard(gone);
    this.audit(p, row.app_id, 'release.artifact', `Artifact ${filename} removed from ${row.version}`);
  }

  /** A member's download: any release status, counted, not audited per key (the member is the actor). */
  async memberDownload(p: Principal, id: string, filename: string, req: IncomingRequest): Promise<Reply> {
    await this.release(p, id, false);
    const a = await this.d.repo.artifact(id, filename);
    if (!a) throw new AppError('artifact_not_found');
    return this.send(a, req);
  }

  private send(a: ArtifactRow, req: IncomingRequest): Reply {
    const reply = fileReply(req, {
      path: this.d.store.pathOf(a.id),
      size: Number(a.size),
      etag: a.sha256,
      filename: a.filename,
    });
    // A download counts once, by its first byte: resumed ranges are the same download.
    if (reply.file!.start === 0)
      this.d.repo.countDownload(a.id).catch((err: unknown) => this.d.log.warn({ err }, 'release.count_failed'));
    return reply;
  }

  // ---- the client side ----------------------------------------------------------------------

  upgrade(call: ClientCall<UpgradeRequest>): Promise<ClientOutcome> {
    return outcome(async (note) => {
      const app = call.app.row;
      const s = call.session?.record;
      if (!s || s.activatedAt === null || !s.licenseId) throw new AppError('session_not_activated');
      const running = parseSemVer(call.body.version);
      if (!running) throw validationError('version', 'Version must be a SemVer 2.0 version', 'value_error');
      const holder = { licenseId: s.licenseId, userId: s.userId };
      const [cutoff, shelf] = await Promise.all([this.cutoff(holder, app.expired_updates), this.shelf(app.id)]);
      note.resellerId = cutoff.resellerId;
      const rank = rankOf(call.body.channel ?? 'stable');
      const platform = call.body.platform ?? 'any';
      const arch = call.body.arch ?? 'any';
      const fits = (a: ArtifactRow) =>
        (a.platform === platform || a.platform === 'any') && (a.arch === arch || a.arch === 'any');
      // Highest first: the first release that passes every rule is the offer.
      const offer = shelf.releases.find(
        (r) =>
          compareSemVer(parseSemVer(r.version)!, running) > 0 &&
          rankOf(r.channel) <= rank &&
          r.entitlements.every((c) => cutoff.entitlements.includes(c)) &&
          (cutoff.until === null || (r.published_at !== null && ms(r.published_at) < cutoff.until)) &&
          (shelf.artifacts.get(r.id) ?? []).some(fits),
      );
      const artifacts = offer ? (shelf.artifacts.get(offer.id) ?? []) : [];
      note.detail = offer ? `Update ${offer.version} offered (running ${call.body.version})` : 'No update';
      if (!offer) return { body: { success: true, upgrade: null }, responseKey: responseKeyOf(call) };
      const base = this.d.publicUrl ?? `http://${call.host ?? 'localhost'}`;
      const expiresAt = this.d.now() + LINK_TTL_MS;
      return {
        body: {
          success: true,
          upgrade: {
            version: offer.version,
            channel: offer.channel,
            notes: offer.notes,
            published_at: iso(offer.published_at),
            artifacts: artifacts.filter(fits).map((a) => ({
              filename: a.filename,
              platform: a.platform,
              arch: a.arch,
              size: Number(a.size),
              sha512: a.sha512,
              signature: a.signature,
              kid: a.kid,
              url: `${base}/api/dl/${this.d.links.issue({ artifactId: a.id, ...holder, expiresAt })}`,
              url_expires_at: new Date(expiresAt).toISOString(),
            })),
          },
        },
        responseKey: responseKeyOf(call),
      };
    });
  }

  /**
   * An app's published releases (highest first) and their artifacts, as upgrade checks read them:
   * kept SHELF_TTL_MS, and dropped at once on this worker when a release of the app changes. Another
   * worker's change is seen within SHELF_TTL_MS; a link of a release yanked meanwhile is refused
   * anyway (the download reads the release again).
   */
  private async shelf(appId: string) {
    const now = this.d.now();
    const kept = this.shelves.get(appId);
    if (kept && now - kept.at < SHELF_TTL_MS) return kept.shelf;
    const shelf = (async () => {
      const releases = (await this.d.repo.published(appId)).sort(byPrecedence);
      const artifacts = new Map<string, ArtifactRow[]>();
      for (const a of await this.d.repo.artifacts(releases.map((r) => r.id)))
        artifacts.set(a.release_id, [...(artifacts.get(a.release_id) ?? []), a]);
      return { releases, artifacts };
    })();
    this.shelves.set(appId, { at: now, shelf });
    shelf.catch(() => this.shelves.delete(appId));
    if (this.shelves.size > MAX_SHELVES) this.shelves.delete(this.shelves.keys().next().value!);
    return shelf;
  }

  private changed(appId: string): void {
    this.shelves.delete(appId);
  }

  /**
   * What a license may receive (docs/releases.md "Expired licenses"): a deleted or banned key is
   * refused; an expired one is refused under `none`, and under `maintain` receives what was published
   * before its expiry (`until`, ms; null: no bound).
   */
  private async cutoff(holder: { licenseId: string; userId: string | null }, rule: ExpiredUpdates) {
    const st = await this.d.standing(holder);
    if (st.state !== 'ok') throw new AppError(st.state === 'banned' ? 'license_banned' : 'license_invalid');
    const expiry = st.expiresAt ? +st.expiresAt : null;
    const expired = expiry !== null && expiry <= this.d.now();
    if (expired && rule === 'none') throw new AppError('license_expired');
    return { until: expired ? expiry : null, entitlements: st.entitlements, resellerId: st.resellerId };
  }

  /** GET /api/dl/<token>: the file, while the link, the key and the release all still allow it. */
  async linkDownload(token: string, req: IncomingRequest): Promise<Reply> {
    const claims = this.d.links.open(token, this.d.now());
    if (!claims) throw new AppError('download_link_expired');
    const a = await this.d.repo.artifactById(claims.artifactId);
    const r = a && (await this.d.repo.find(a.release_id));
    if (!a || !r || r.status !== 'published') throw new AppError('download_link_expired');
    const rule = (await this.d.apps.expiredUpdates(r.app_id)) ?? 'none';
    const holder = { licenseId: claims.licenseId, userId: claims.userId };
    const cutoff = await this.cutoff(holder, rule).catch((err: unknown) => {
      throw err instanceof AppError ? new AppError('download_link_expired') : err;
    });
    if (cutoff.until !== null && (r.published_at === null || ms(r.published_at) >= cutoff.until))
      throw new AppError('download_link_expired');
    if (!r.entitlements.every((c) => cutoff.entitlements.includes(c))) throw new AppError('download_link_expired');
    const reply = this.send(a, req);
    const hour = new Date(Math.floor(this.d.now() / HOUR_MS) * HOUR_MS);
    // release.download: once per key, artifact and hour, whatever the number of (range) requests.
    this.d.repo
      .markDownload(a.id, claims.licenseId, hour)
      .then((first) => {
        if (first)
          this.d.audit.write({
            appId: r.app_id,
            action: 'release.download',
            detail: `${a.filename} of ${r.version} downloaded by key ${claims.licenseId}`,
            ip: req.ip,
            resellerId: cutoff.resellerId,
          });
      })
      .catch((err: unknown) => this.d.log.warn({ err }, 'release.audit_failed'));
    return reply;
  }
}

/** The session's response key: the upgrade answer is encrypted like every client answer (docs/protocol.md 5). */
function responseKeyOf(call: ClientCall<unknown>): Buffer | null {
  const k = call.session?.record.encKey ?? null;
  // Records stored before sealed tokens kept the enc_key itself.
  return typeof k === 'string' ? responseEncryptionKey(k, call.app.row.api_secret) : k;
}
