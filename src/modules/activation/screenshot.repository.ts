// Who keeps which screenshot (docs/protocol.md 11.27): one row per (owner, image). The store removes a file
// only once no row of its application names it any more.
import type { Sql } from '../../platform/db/sql.js';

interface StoredImage {
  appId: string;
  sha256: string;
  ext: string;
}

export class ScreenshotRepository {
  constructor(private readonly sql: Sql) {}

  /** Records (or refreshes) that `owner` sent this image now. */
  async keep(owner: string, appId: string, sha256: string, ext: string, bytes: number, at: Date): Promise<void> {
    await this.sql.run(
      `insert into screenshots (owner_id, sha256, app_id, ext, bytes, at) values (?, ?, ?, ?, ?, ?)
       on conflict (owner_id, sha256) do update set at = excluded.at`,
      [owner, sha256, appId, ext, bytes, at],
    );
  }

  /** Drops each owner's rows past its newest `keep`; returns the images no row names any more. */
  async trimOwners(owners: readonly string[], keep: number): Promise<StoredImage[]> {
    if (owners.length === 0) return [];
    const dropped = await this.sql.all<{ app_id: string; sha256: string; ext: string }>(
      `delete from screenshots s using (
         select owner_id, sha256, row_number() over (partition by owner_id order by at desc, sha256) as n
         from screenshots where owner_id in (${owners.map(() => '?').join(',')})
       ) r
       where s.owner_id = r.owner_id and s.sha256 = r.sha256 and r.n > ?
       returning s.app_id, s.sha256, s.ext`,
      [...owners, keep],
    );
    return this.unreferenced(dropped);
  }

  /**
   * While the distinct images together pass `limitBytes`, removes the least recently sent image
   * (every row naming it); returns the images removed.
   */
  async evictBeyond(limitBytes: number): Promise<StoredImage[]> {
    const dropped = await this.sql.all<{ app_id: string; sha256: string; ext: string }>(
      `with images as (
         select app_id, sha256, max(ext) as ext, max(bytes) as bytes, max(at) as at
         from screenshots group by app_id, sha256
       ), ranked as (
         select app_id, sha256, sum(bytes) over (order by at desc, sha256) as running from images
       ), evicted as (
         select app_id, sha256 from ranked where running > ?
       )
       delete from screenshots s using evicted e where s.app_id = e.app_id and s.sha256 = e.sha256
       returning s.app_id, s.sha256, s.ext`,
      [limitBytes],
    );
    return this.unreferenced(dropped);
  }

  private async unreferenced(rows: { app_id: string; sha256: string; ext: string }[]): Promise<StoredImage[]> {
    const out: StoredImage[] = [];
    const seen = new Set<string>();
    for (const r of rows) {
      const id = `${r.app_id}/${r.sha256}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const still = await this.sql.one('select 1 from screenshots where app_id = ? and sha256 = ? limit 1', [
        r.app_id,
        r.sha256,
      ]);
      if (!still) out.push({ appId: r.app_id, sha256: r.sha256, ext: r.ext });
    }
    return out;
  }
}
