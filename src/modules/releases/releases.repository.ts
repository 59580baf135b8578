// Releases and their artifacts in PostgreSQL (docs/releases.md): only this module reads or writes
// `releases`, `release_artifacts` and `release_download_marks`.
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../platform/db/sql.js';
import type { Channel } from './releases.requests.js';

type ReleaseStatus = 'draft' | 'published' | 'yanked';

export interface ReleaseRow {
  id: string;
  app_id: string;
  version: string;
  channel: Channel;
  notes: string;
  entitlements: string[];
  status: ReleaseStatus;
  /** Timestamps as the driver returns them (Date or text). */
  created_at: Date | string;
  published_at: Date | string | null;
  yanked_at: Date | string | null;
}

export interface ArtifactRow {
  id: string;
  release_id: string;
  filename: string;
  platform: string;
  arch: string;
  /** bigint columns come back as text. */
  size: string;
  sha256: string;
  sha512: string;
  signature: string;
  kid: string;
  downloads: string;
  created_at: Date | string;
}

type NewArtifact = Omit<ArtifactRow, 'release_id' | 'downloads' | 'created_at' | 'size'> & {
  size: number;
};

const RELEASE_COLUMNS =
  'id, app_id, version, channel, notes, entitlements, status, created_at, published_at, yanked_at';
const ARTIFACT_COLUMNS =
  'id, release_id, filename, platform, arch, size, sha256, sha512, signature, kid, downloads, created_at';

export class ReleaseRepository {
  constructor(private readonly sql: Sql) {}

  async create(
    appId: string,
    r: Omit<ReleaseRow, 'id' | 'app_id' | 'status' | 'published_at' | 'yanked_at'>,
    by: string,
  ) {
    const row = await this.sql.one<ReleaseRow>(
      `insert into releases (id, app_id, version, channel, notes, entitlements, status, created_by, created_at)
       values (?, ?, ?, ?, ?, ?::jsonb, 'draft', ?, ?) returning ${RELEASE_COLUMNS}`,
      [randomUUID(), appId, r.version, r.channel, r.notes, JSON.stringify(r.entitlements), by, r.created_at],
    );
    return row!;
  }

  find(id: string): Promise<ReleaseRow | undefined> {
    return this.sql.one<ReleaseRow>(`select ${RELEASE_COLUMNS} from releases where id = ?`, [id]);
  }

  listForApp(appId: string): Promise<ReleaseRow[]> {
    return this.sql.all<ReleaseRow>(`select ${RELEASE_COLUMNS} from releases where app_id = ?`, [appId]);
  }

  /** Published releases of an app (what an upgrade check chooses from). */
  published(appId: string): Promise<ReleaseRow[]> {
    return this.sql.all<ReleaseRow>(
      `select ${RELEASE_COLUMNS} from releases where app_id = ? and status = 'published'`,
      [appId],
    );
  }

  async appOf(id: string): Promise<string | null> {
    return (await this.sql.one<{ app_id: string }>('select app_id from releases where id = ?', [id]))?.app_id ?? null;
  }

  async update(id: string, patch: Partial<Pick<ReleaseRow, 'channel' | 'notes' | 'entitlements'>>) {
    const sets: string[] = [];
    const values: unknown[] = [];
    const set = (sql: string, value: unknown) => {
      sets.push(sql);
      values.push(value);
    };
    if (patch.channel !== undefined) set('channel = ?', patch.channel);
    if (patch.notes !== undefined) set('notes = ?', patch.notes);
    if (patch.entitlements !== undefined) set('entitlements = ?::jsonb', JSON.stringify(patch.entitlements));
    return this.sql.one<ReleaseRow>(
      `update releases set ${sets.join(', ')} where id = ? returning ${RELEASE_COLUMNS}`,
      [...values, id],
    );
  }

  /** Moves a release from one status to another; undefined when it was not in `from` (a race lost). */
  setStatus(id: string, from: ReleaseStatus, to: ReleaseStatus, at: Date): Promise<ReleaseRow | undefined> {
    const column = to === 'published' ? 'published_at' : 'yanked_at';
    return this.sql.one<ReleaseRow>(
      `update releases set status = ?, ${column} = ? where id = ? and status = ? returning ${RELEASE_COLUMNS}`,
      [to, at, id, from],
    );
  }

  /** Deletes a draft; false when it is not one (any more). */
  async deleteDraft(id: string): Promise<boolean> {
    return (await this.sql.run(`delete from releases where id = ? and status = 'draft'`, [id])) > 0;
  }

  artifacts(releaseIds: readonly string[]): Promise<ArtifactRow[]> {
    if (releaseIds.length === 0) return Promise.resolve([]);
    return this.sql.all<ArtifactRow>(
      `select ${ARTIFACT_COLUMNS} from release_artifacts where release_id in (${releaseIds.map(() => '?').join(', ')})
       order by filename`,
      [...releaseIds],
    );
  }

  artifact(releaseId: string, filename: string): Promise<ArtifactRow | undefined> {
    return this.sql.one<ArtifactRow>(
      `select ${ARTIFACT_COLUMNS} from release_artifacts where release_id = ? and filename = ?`,
      [releaseId, filename],
    );
  }

  artifactById(id: string): Promise<ArtifactRow | undefined> {
    return this.sql.one<ArtifactRow>(`select ${ARTIFACT_COLUMNS} from release_artifacts where id = ?`, [id]);
  }

  /**
   * Records an artifact (a new id each time, so a replaced file never shares a name on disk with the
   * one it replaces); returns it and the id of the row it replaced, if any. Only while the release is
   * a draft: undefined otherwise.
   */
  putArtifact(
    releaseId: string,
    a: NewArtifact,
    at: Date,
  ): Promise<{ row: ArtifactRow; replaced: string | null } | undefined> {
    return this.sql.transaction(async (tx) => {
      const draft = await this.sql.one<{ id: string }>(
        `select id from releases where id = ? and status = 'draft' for update`,
        [releaseId],
        tx,
      );
      if (!draft) return undefined;
      const old = await this.sql.one<{ id: string }>(
        'delete from release_artifacts where release_id = ? and filename = ? returning id',
        [releaseId, a.filename],
        tx,
      );
      const row = await this.sql.one<ArtifactRow>(
        `insert into release_artifacts (id, release_id, filename, platform, arch, size, sha256, sha512, signature, kid,
           created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) returning ${ARTIFACT_COLUMNS}`,
        [a.id, releaseId, a.filename, a.platform, a.arch, a.size, a.sha256, a.sha512, a.signature, a.kid, at],
        tx,
      );
      return { row: row!, replaced: old?.id ?? null };
    });
  }

  /** Deletes a draft's artifact; its id, or undefined when there is none or the release is not a draft. */
  async deleteArtifact(releaseId: string, filename: string): Promise<string | undefined> {
    const row = await this.sql.one<{ id: string }>(
      `delete from release_artifacts a using releases r where a.release_id = r.id and r.id = ? and r.status = 'draft'
         and a.filename = ? returning a.id`,
      [releaseId, filename],
    );
    return row?.id;
  }

  async countDownload(artifactId: string): Promise<void> {
    await this.sql.run('update release_artifacts set downloads = downloads + 1 where id = ?', [artifactId]);
  }

  /** True the first time (artifact, license) is seen in this hour: that download is audited. */
  async markDownload(artifactId: string, licenseId: string, hour: Date): Promise<boolean> {
    return (
      (await this.sql.run(
        'insert into release_download_marks (artifact_id, license_id, hour) values (?, ?, ?) on conflict do nothing',
        [artifactId, licenseId, hour],
      )) > 0
    );
  }

  /** Every artifact id on disk that rows still name (deleted releases take theirs with them). */
  async artifactIdsOf(releaseId: string): Promise<string[]> {
    return (
      await this.sql.all<{ id: string }>('select id from release_artifacts where release_id = ?', [releaseId])
    ).map((r) => r.id);
  }
}
