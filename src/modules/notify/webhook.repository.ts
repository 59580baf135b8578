// Where an application's events may be delivered: the app's own webhook, the webhook of the
// account whose records the event is about, and the owner's; with the secrets that sign them.
import type { Permissions, StoredRole } from '../../platform/db/entities/index.js';
import type { Sql } from '../../platform/db/sql.js';

interface WebhookCandidates {
  app_name: string;
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
  constructor(private readonly sql: Sql) {}

  candidates(appId: string, memberId: string | null): Promise<WebhookCandidates | undefined> {
    return this.sql.one<WebhookCandidates>(
      `select a.name as app_name, a.webhook as app_hook, o.webhook as owner_hook, o.webhook_secret as owner_secret,
              m.webhook as member_hook, m.webhook_secret as member_secret, m.role as member_role,
              m.permissions as member_permissions, m.email as member_email
       from applications a join accounts o on o.id = a.owner_id left join accounts m on m.id = ?
       where a.id = ?`,
      [memberId, appId],
    );
  }
}
