// Where an application's events may be delivered: the app's own webhook, the webhook of the
// account whose records the event is about, and the owner's; with the secrets that sign them.
import type { Permissions, StoredRole } from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';
import { ReadBatcher } from '../../platform/db/read-batcher.js';

interface WebhookCandidates {
  app_name: string;
  owner_id: string;
  member_id: string | null;
  app_hook: string;
  owner_hook: string;
  owner_secret: string;
  member_hook: string | null;
  member_secret: string | null;
  member_role: StoredRole | null;
  member_permissions: Permissions | null;
  member_email: string | null;
}

export class WebhookRepository {
  /** Asked on every client event (most apps have no webhook): the turn's questions share one statement. */
  private readonly reads = new ReadBatcher<readonly [string, string | null], WebhookCandidates | undefined>((asked) =>
    this.candidatesMany(asked),
  );

  constructor(private readonly sql: Sql) {}

  candidates(appId: string, memberId: string | null): Promise<WebhookCandidates | undefined> {
    return this.reads.load([appId, memberId]);
  }

  private async candidatesMany(
    asked: readonly (readonly [string, string | null])[],
  ): Promise<(WebhookCandidates | undefined)[]> {
    const r = await this.sql.prepared<WebhookCandidates & { i: string }>(
      `select q.i, a.name as app_name, a.owner_id, m.id as member_id,
              a.webhook as app_hook, o.webhook as owner_hook, o.webhook_secret as owner_secret,
              m.webhook as member_hook, m.webhook_secret as member_secret, m.role as member_role,
              m.permissions as member_permissions, m.email as member_email
       from unnest($1::uuid[], $2::uuid[]) with ordinality as q(app_id, member_id, i)
       join applications a on a.id = q.app_id join accounts o on o.id = a.owner_id
       left join accounts m on m.id = q.member_id`,
      [asked.map(([appId]) => appId), asked.map(([, memberId]) => memberId)],
    );
    const out = new Array<WebhookCandidates | undefined>(asked.length);
    for (const { i, ...row } of r.rows) out[Number(i) - 1] = row;
    return out;
  }
}
