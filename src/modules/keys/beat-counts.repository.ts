// Accepted heartbeats per application, reseller and UTC hour (the beats chart, the time series):
// the heartbeat module counts them in memory and hands each flush here. The reseller is the key's
// (or the end user's); counts of an application deleted meanwhile are dropped.
import type { Sql } from '../../platform/db/sql.js';

/** Beats counted for one application, key, user and UTC hour (ms). */
interface BeatCount {
  appId: string;
  licenseId: string | null;
  userId: string | null;
  hour: number;
  n: number;
}

export class BeatCountsRepository {
  constructor(private readonly sql: Sql) {}

  async addBeats(batch: readonly BeatCount[]): Promise<void> {
    const values: unknown[] = [];
    for (const b of batch) values.push(b.appId, b.licenseId, b.userId, new Date(b.hour), b.n);
    // Ordered by the primary key, so two workers' upserts take their row locks in the same order.
    await this.sql.run(
      `insert into beat_counts (app_id, reseller_id, hour, beats)
       select v.app_id, coalesce(k.reseller_id::text, u.reseller_id::text, ''), v.hour, sum(v.n)
       from (values ${batch.map(() => '(?::uuid, ?::uuid, ?::uuid, ?::timestamptz, ?::bigint)').join(',')})
         as v(app_id, license_id, user_id, hour, n)
       join applications a on a.id = v.app_id
       left join license_keys k on k.id = v.license_id
       left join end_users u on u.id = v.user_id
       group by 1, 2, 3
       order by 1, 2, 3
       on conflict (app_id, reseller_id, hour) do update set beats = beat_counts.beats + excluded.beats`,
      values,
    );
  }
}
