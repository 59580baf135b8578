// Alert webhooks (SPEC "Alert webhook", PROTOCOL 10, 11.14). Resolution: the app's webhook, then
// the default webhook of the account that owns the key (its reseller), then the app owner's
// global webhook. Payload {id, event, app_id, occurred_at, data}, signed with the secret of the
// account whose webhook it is: X-Keywarden-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>.
// Discord URLs get an embed instead. Delivery runs after the response, is retried with backoff
// for a bounded time, never follows redirects, re-checks the target address, and every attempt
// is written to the app's audit log.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { hmacSha256 } from '../crypto/index.js';
import type { Sql } from '../db/sql.js';
import type { AuditRepository } from '../db/repositories/audit.repository.js';
import { assertWebhookUrl } from './webhook-url.js';

export const RETRY_DELAYS_MS = [1_000, 4_000, 15_000];
const ATTEMPT_TIMEOUT_MS = 5_000;

export interface WebhookTarget {
  url: string;
  secret: string;
}

export interface WebhookDeps {
  sql: Sql;
  audit: AuditRepository;
  log: Logger;
  now: () => number;
  allowPrivate: boolean;
  /** Tests shorten the backoff. */
  retryDelaysMs?: readonly number[];
}

export function isDiscord(url: URL): boolean {
  return /(^|\.)discord(app)?\.com$/i.test(url.hostname);
}

export class WebhookService {
  private readonly inflight = new Set<Promise<void>>();

  constructor(private readonly d: WebhookDeps) {}

  /** The webhook an event of this app (about a record of this reseller) goes to, if any. */
  async resolve(appId: string, resellerId: string | null): Promise<WebhookTarget | null> {
    const row = await this.d.sql.one<{ app_hook: string; owner_hook: string; owner_secret: string; member_hook: string | null; member_secret: string | null }>(
      `select a.webhook as app_hook, o.webhook as owner_hook, o.webhook_secret as owner_secret,
              m.webhook as member_hook, m.webhook_secret as member_secret
       from applications a join accounts o on o.id = a.owner_id left join accounts m on m.id = ?
       where a.id = ?`,
      [resellerId, appId],
    );
    if (!row) return null;
    if (row.app_hook) return { url: row.app_hook, secret: row.owner_secret };
    if (row.member_hook && row.member_secret) return { url: row.member_hook, secret: row.member_secret };
    if (row.owner_hook) return { url: row.owner_hook, secret: row.owner_secret };
    return null;
  }

  /** Fires and forgets: the client's response never waits for a webhook. */
  notify(appId: string, resellerId: string | null, event: string, data: Record<string, unknown>): void {
    const p = this.run(appId, resellerId, event, data).catch((err: unknown) => this.d.log.error({ err, appId, event }, 'webhook.failed'));
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  /** Waits for deliveries under way (shutdown, tests). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  private async run(appId: string, resellerId: string | null, event: string, data: Record<string, unknown>): Promise<void> {
    const target = await this.resolve(appId, resellerId);
    if (!target) return;
    const id = randomUUID();
    const occurredAt = new Date(this.d.now()).toISOString();
    const url = new URL(target.url);
    const body = Buffer.from(JSON.stringify(isDiscord(url)
      ? { embeds: [{ title: `Keywarden: ${event}`, timestamp: occurredAt, fields: Object.entries(data).map(([name, value]) => ({ name, value: String(value ?? '-'), inline: true })) }] }
      : { id, event, app_id: appId, occurred_at: occurredAt, data }));
    const delays = this.d.retryDelaysMs ?? RETRY_DELAYS_MS;
    for (let attempt = 1; attempt <= delays.length + 1; attempt++) {
      const outcome = await this.attempt(target, body);
      this.d.audit.write({
        appId, action: 'webhook.delivery', level: outcome.ok ? 'info' : 'warning',
        detail: `${event} attempt ${attempt}: ${outcome.detail} (${url.host})`,
      });
      if (outcome.ok || outcome.final) return;
      const wait = delays[attempt - 1];
      if (wait === undefined) return;
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  private async attempt(target: WebhookTarget, body: Buffer): Promise<{ ok: boolean; final?: boolean; detail: string }> {
    try {
      // Checked again at delivery: the name may resolve elsewhere now (PROTOCOL 11.14).
      await assertWebhookUrl(target.url, this.d.allowPrivate);
    } catch {
      return { ok: false, final: true, detail: 'refused: not a public https URL' };
    }
    const t = String(Math.floor(this.d.now() / 1000));
    const signature = hmacSha256(target.secret, Buffer.concat([Buffer.from(`${t}.`), body])).toString('hex');
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        body: new Uint8Array(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        headers: { 'Content-Type': 'application/json', 'User-Agent': 'Keywarden-Webhook/1', 'X-Keywarden-Signature': `t=${t},v1=${signature}` },
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status >= 200 && res.status < 300) return { ok: true, detail: `HTTP ${res.status}` };
      // A client error other than rate limiting will not get better by retrying.
      return { ok: false, final: res.status >= 300 && res.status < 500 && res.status !== 429, detail: `HTTP ${res.status}` };
    } catch (err) {
      return { ok: false, detail: `network error: ${(err as Error).name}` };
    }
  }
}
