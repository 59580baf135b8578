// Alert webhooks (docs/spec.md "Alert webhook", docs/protocol.md 10, 11.14). Resolution: the app's webhook, then
// the default webhook of the account that owns the key (its reseller), then the app owner's
// global webhook. Payload {id, event, app_id, occurred_at, data}, signed with the secret of the
// account whose webhook it is: X-Keywarden-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>.
// Discord URLs get an embed instead, with the activation screenshot attached (discord-embed.ts).
// What a delivery shows follows docs/spec.md's hiding rules for the account whose webhook it is
// (access/visibility.ts: one rule for every channel). Delivery runs after the response, is retried with
// backoff for a bounded time, never follows redirects, re-checks the target address, and every
// attempt is written to the app's audit log.
import { FULL_SIGHT, sightOfAccount, visible, type Sight } from '../access/index.js';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { hmacSha256 } from '../../platform/crypto/index.js';
import type { WebhookRepository } from './webhook.repository.js';
import { DELIVERY_RETENTION_MS, type DeliveryRepository, type StoredDelivery } from './delivery.repository.js';
import type { AuditRepository } from '../audit/index.js';
import { assertWebhookUrl } from './webhook-url.js';
import { discordBody, type EncodedBody, type Screenshot } from './discord-embed.js';

const RETRY_DELAYS_MS = [1_000, 4_000, 15_000];
const ATTEMPT_TIMEOUT_MS = 5_000;
/** What a delivery row keeps of the receiver's answer. */
const EXCERPT_BYTES = 1024;
const PRUNE_EVERY_MS = 3600_000;

/** One attempt's outcome, as the delivery log records it. */
interface Outcome {
  ok: boolean;
  /** No retry can help (a refused address, a client error). */
  final?: boolean;
  detail: string;
  status: number | null;
  error: string | null;
  latencyMs: number;
  excerpt: string;
}

interface WebhookTarget {
  url: string;
  secret: string;
  /** The account whose webhook it is: its secret signs, its delivery log records. */
  accountId: string;
  appName: string;
  /** What this webhook's account may see of event data (access/visibility.ts). */
  sees: Sight;
}

interface WebhookDeps {
  targets: Pick<WebhookRepository, 'candidates'>;
  deliveries: DeliveryRepository;
  /** The account's current webhook secret (a redelivery is signed afresh); null: no such account. */
  secretOf: (accountId: string) => Promise<string | null>;
  audit: AuditRepository;
  log: Logger;
  now: () => number;
  allowPrivate: boolean;
  /** Tests shorten the backoff. */
  retryDelaysMs?: readonly number[];
  /** Where screenshot paths in webhook data are relative to (DATA_DIR). */
  dataDir: string;
  developerEmails: readonly string[];
  /** WEBHOOK_DISCORD_HOSTS: more hosts (`name` or `name:port`) to send the Discord format to. */
  discordHosts?: readonly string[];
  /** Credit line of the geo data, shown next to locations in Discord embeds. */
  geoAttribution?: string | null;
}

export function isDiscord(url: URL, extraHosts: readonly string[] = []): boolean {
  return (
    /(^|\.)discord(app)?\.com$/i.test(url.hostname) ||
    extraHosts.includes(url.host.toLowerCase()) ||
    extraHosts.includes(url.hostname.toLowerCase())
  );
}

/** A stored screenshot: named by its SHA-256 (older ones by a UUID). */
const SCREENSHOT = /^screenshots\/[0-9a-f-]{36}\/([0-9a-f]{64}|[0-9a-f-]{36})\.(png|jpg|webp|bin)$/;

export class WebhookService {
  private readonly inflight = new Set<Promise<void>>();
  private prunedAt = 0;

  constructor(private readonly d: WebhookDeps) {}

  /** The webhook an event of this app (about a record of this reseller) goes to, if any. */
  async resolve(appId: string, resellerId: string | null): Promise<WebhookTarget | null> {
    const row = await this.d.targets.candidates(appId, resellerId);
    if (!row) return null;
    const owner = { secret: row.owner_secret, accountId: row.owner_id, appName: row.app_name, sees: FULL_SIGHT };
    if (row.app_hook) return { url: row.app_hook, ...owner };
    if (row.member_hook && row.member_secret && row.member_id) {
      // Owners, admins and developers see everything; a reseller what its permissions allow.
      const developer = row.member_email !== null && this.d.developerEmails.includes(row.member_email.toLowerCase());
      const sees = sightOfAccount(developer ? 'developer' : (row.member_role ?? 'reseller'), row.member_permissions);
      return { url: row.member_hook, secret: row.member_secret, accountId: row.member_id, appName: row.app_name, sees };
    }
    if (row.owner_hook) return { url: row.owner_hook, ...owner };
    return null;
  }

  /** Fires and forgets: the client's response never waits for a webhook. */
  notify(appId: string, resellerId: string | null, event: string, data: Record<string, unknown>): void {
    const p = this.run(appId, resellerId, event, data).catch((err: unknown) =>
      this.d.log.error({ err, appId, event }, 'webhook.failed'),
    );
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  /** Waits for deliveries under way (shutdown, tests). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  private async run(
    appId: string,
    resellerId: string | null,
    event: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    const target = await this.resolve(appId, resellerId);
    if (!target) return;
    const id = randomUUID();
    const occurredAt = new Date(this.d.now()).toISOString();
    const url = new URL(target.url);
    const shown = visible(target.sees, data);
    const body: EncodedBody = isDiscord(url, this.d.discordHosts)
      ? discordBody({
          event,
          appName: target.appName,
          occurredAt,
          data: shown,
          screenshot: await this.screenshot(shown.screenshot),
          attribution: this.d.geoAttribution,
        })
      : {
          body: Buffer.from(JSON.stringify({ id, event, app_id: appId, occurred_at: occurredAt, data: shown })),
          contentType: 'application/json',
        };
    const delays = this.d.retryDelaysMs ?? RETRY_DELAYS_MS;
    for (let attempt = 1; attempt <= delays.length + 1; attempt++) {
      const outcome = await this.attempt(target, body);
      await this.record({ appId, event, eventId: id, target, attempt, body, outcome });
      if (outcome.ok || outcome.final) return;
      const wait = delays[attempt - 1];
      if (wait === undefined) return;
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /**
   * Sends a logged delivery's event again, now: the same event id and body, signed afresh with the
   * account's current secret, recorded as a new delivery row (one attempt, no retries).
   */
  async redeliver(d: StoredDelivery): Promise<StoredDelivery> {
    const secret = await this.d.secretOf(d.accountId);
    const target: WebhookTarget = {
      url: d.url,
      secret: secret ?? '',
      accountId: d.accountId,
      appName: '',
      sees: FULL_SIGHT,
    };
    const body = { body: d.body, contentType: d.contentType };
    const outcome: Outcome =
      secret === null
        ? {
            ok: false,
            detail: 'refused: no such account',
            status: null,
            error: 'account deleted',
            latencyMs: 0,
            excerpt: '',
          }
        : await this.attempt(target, body);
    return this.record({ appId: d.appId, event: d.event, eventId: d.eventId, target, attempt: 1, body, outcome });
  }

  /** One attempt into the app's audit log and the account's delivery log. */
  private async record(a: {
    appId: string;
    event: string;
    eventId: string;
    target: WebhookTarget;
    attempt: number;
    body: EncodedBody;
    outcome: Outcome;
  }): Promise<StoredDelivery> {
    const { outcome } = a;
    const at = this.d.now();
    this.d.audit.write({
      appId: a.appId,
      action: 'webhook.delivery',
      level: outcome.ok ? 'info' : 'warning',
      detail: `${a.event} attempt ${a.attempt}: ${outcome.detail} (${new URL(a.target.url).host})`,
    });
    if (at - this.prunedAt > PRUNE_EVERY_MS) {
      this.prunedAt = at;
      await this.d.deliveries.prune(new Date(at - DELIVERY_RETENTION_MS));
    }
    return this.d.deliveries.insert({
      accountId: a.target.accountId,
      appId: a.appId,
      event: a.event,
      eventId: a.eventId,
      url: a.target.url,
      attempt: a.attempt,
      status: outcome.status,
      error: outcome.error,
      latencyMs: outcome.latencyMs,
      responseExcerpt: outcome.excerpt,
      contentType: a.body.contentType,
      body: a.body.body,
      at: new Date(at),
    });
  }

  /** The stored activation screenshot a Discord embed attaches; undefined when none or unreadable. */
  private async screenshot(rel: unknown): Promise<Screenshot | undefined> {
    if (typeof rel !== 'string' || !SCREENSHOT.test(rel)) return undefined;
    try {
      return { bytes: await fs.readFile(path.join(this.d.dataDir, rel)), ext: path.extname(rel).slice(1) };
    } catch (err) {
      this.d.log.warn({ err, path: rel }, 'webhook.screenshot_unreadable');
      return undefined;
    }
  }

  private async attempt(target: WebhookTarget, { body, contentType }: EncodedBody): Promise<Outcome> {
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    try {
      // Checked again at delivery: the name may resolve elsewhere now (docs/protocol.md 11.14).
      await assertWebhookUrl(target.url, this.d.allowPrivate);
    } catch {
      const detail = 'refused: not a public https URL';
      return { ok: false, final: true, detail, status: null, error: detail, latencyMs: took(), excerpt: '' };
    }
    const t = String(Math.floor(this.d.now() / 1000));
    const signature = hmacSha256(target.secret, Buffer.concat([Buffer.from(`${t}.`), body])).toString('hex');
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        body: new Uint8Array(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        headers: {
          'Content-Type': contentType,
          'User-Agent': 'Keywarden-Webhook/1',
          'X-Keywarden-Signature': `t=${t},v1=${signature}`,
        },
      });
      const excerpt = await readExcerpt(res);
      const answered = { detail: `HTTP ${res.status}`, status: res.status, error: null, latencyMs: took(), excerpt };
      if (res.status >= 200 && res.status < 300) return { ok: true, ...answered };
      // A client error other than rate limiting will not get better by retrying.
      return { ok: false, final: res.status >= 300 && res.status < 500 && res.status !== 429, ...answered };
    } catch (err) {
      const detail = `network error: ${(err as Error).name}`;
      return { ok: false, detail, status: null, error: detail, latencyMs: took(), excerpt: '' };
    }
  }
}

/** The first KiB of an answer's body as text (the rest is not read: the connection is let go). */
async function readExcerpt(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < EXCERPT_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // a body cut short is shown as far as it came
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return cutUtf8(Buffer.concat(chunks), EXCERPT_BYTES);
}

/** At most `max` bytes of UTF-8, never ending inside a character. */
function cutUtf8(buf: Buffer, max: number): string {
  if (buf.byteLength <= max) return buf.toString('utf8');
  let end = max;
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}
