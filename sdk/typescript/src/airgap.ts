// Air-gapped machines (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).
//
// Activation request: "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
// "nonce", "created_at"}), written with no network. The nonce (16 random bytes) stays in a small JSON
// file; the answer is an offline license file whose payload carries request_nonce, accepted only when
// every offline-file check passes and that nonce is the one of this machine's latest request
// (else offline_invalid / wrong_request).
//
// Seat pool: "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second dot),
// signed by a pinned response key. A relay hands it out with every lease; a lease is believed only when
// its pool verifies, names this application and is still valid.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { ed25519VerifyBytes } from './crypto.js';
import { KeywardenError, offlineError } from './errors.js';
import { b64url, grantFieldsOk, openSigned, text } from './offline.js';
import { TransportError, type Transport } from './transport.js';
import { parseUtcMs } from './utc.js';
import type { PinnedKeys } from './verify.js';

/** The relay's answer when every seat of its pool is leased (mapped to `session_limit`). */
export const NO_SEATS = 'No seats available';

/** The request text for these values (nonce and time are the caller's; see RequestStore). */
export function buildRequest(
  appId: string,
  key: string,
  hwid: string,
  nonce: string,
  createdAt: string,
  components?: Record<string, string>,
): string {
  const body: Record<string, unknown> = { v: 1, app_id: appId, key, hwid };
  if (components && Object.keys(components).length > 0) body.components = { ...components };
  body.nonce = nonce;
  body.created_at = createdAt;
  return `kwreq1.${Buffer.from(JSON.stringify(body), 'utf8').toString('base64url')}`;
}

/**
 * The nonce of this machine's latest activation request, kept in {"v": 1, "nonce", "created_at"}
 * (written atomically). A new request replaces it, so an answer to an older one is refused.
 */
export class RequestStore {
  constructor(readonly file: string) {}

  newRequest(appId: string, key: string, hwid: string, nowMs: number, components?: Record<string, string>): string {
    const nonce = randomBytes(16).toString('base64url');
    const createdAt = new Date(nowMs).toISOString();
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    const tmp = path.join(path.dirname(this.file), `.kwreq-${randomBytes(6).toString('hex')}`);
    try {
      fs.writeFileSync(tmp, JSON.stringify({ v: 1, nonce, created_at: createdAt }));
      fs.renameSync(tmp, this.file);
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
    return buildRequest(appId, key, hwid, nonce, createdAt, components);
  }

  /** The kept nonce, undefined when there is none (or the file is damaged). */
  nonce(): string | undefined {
    try {
      const v = JSON.parse(fs.readFileSync(this.file, 'utf8')) as { nonce?: unknown } | null;
      return v && text(v.nonce) ? v.nonce : undefined;
    } catch {
      return undefined;
    }
  }
}

/** After the offline-file checks passed: the payload's request_nonce must be `nonce` (else wrong_request). */
export function checkRequestNonce(file: string, nonce: string | undefined): void {
  if (nonce === undefined) throw offlineError('wrong_request', 'no activation request is kept on this machine');
  const raw = b64url(file.trim().split('.')[1] ?? '');
  let got: unknown;
  try {
    got = raw ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>).request_nonce : undefined;
  } catch {
    got = undefined;
  }
  const a = Buffer.from(typeof got === 'string' ? got : '', 'utf8');
  const b = Buffer.from(nonce, 'utf8');
  if (a.length !== b.length || !timingSafeEqual(a, b))
    throw offlineError('wrong_request', "not the answer to this machine's latest activation request");
}

/** A verified seat pool: what the relay's license grants and until when. */
export interface SeatPool {
  appId: string;
  licenseId: string;
  relayId: string;
  seats: number;
  level: number;
  /** Sorted codes. */
  entitlements: string[];
  expiresAt: Date | null;
  validUntil: Date;
  issuedAt: Date;
  kid: string;
}

/** Checks a POOL in the order of airgap.json: malformed, unknown_kid, bad_signature, wrong_app, expired. */
export function verifyPool(pool: unknown, keys: PinnedKeys, appId: string, nowMs: number): SeatPool {
  const { signed, sig, p } = openSigned(pool, 'kwpool1');
  const good =
    grantFieldsOk(p) &&
    ['kid', 'app_id', 'license_id', 'relay_id'].every((k) => text(p[k])) &&
    Number.isInteger(p.seats) &&
    (p.seats as number) >= 1;
  if (!good) throw offlineError('malformed', 'pool payload lacks a field or has one of the wrong type');
  const key = keys.get(p.kid as string);
  if (!key)
    throw offlineError('unknown_kid', `pool signed under key ${JSON.stringify(p.kid)}, which this SDK does not pin`);
  if (!ed25519VerifyBytes(key, Buffer.from(signed, 'ascii'), sig))
    throw offlineError('bad_signature', "the pool's signature does not verify");
  if (p.app_id !== appId) throw offlineError('wrong_app', `pool issued for application ${JSON.stringify(p.app_id)}`);
  const until = parseUtcMs(p.valid_until)!;
  if (nowMs >= until) throw offlineError('expired', `pool valid until ${String(p.valid_until)}`);
  const expires = parseUtcMs(p.expires_at);
  return {
    appId: p.app_id as string,
    licenseId: p.license_id as string,
    relayId: p.relay_id as string,
    seats: p.seats as number,
    level: p.level as number,
    entitlements: [...new Set(p.entitlements as string[])].sort(),
    expiresAt: expires === undefined ? null : new Date(expires),
    validUntil: new Date(until),
    issuedAt: new Date(parseUtcMs(p.issued_at)!),
    kid: p.kid as string,
  };
}

interface Lease {
  leaseId: string;
  expiresMs: number;
  pool: SeatPool;
}

interface RelayOptions {
  keys: PinnedKeys;
  appId: string;
  transport: Transport;
  timeoutMs: number;
  clock: () => number;
}

/** HTTP calls to a relay; every lease answer is believed only with a verified pool of this app. */
class RelayClient {
  readonly base: string;
  constructor(
    url: string,
    private readonly o: RelayOptions,
  ) {
    this.base = url.replace(/\/+$/, '');
  }

  private async send(method: 'POST' | 'PUT' | 'DELETE', p: string, body?: unknown): Promise<[number, unknown]> {
    let res;
    try {
      res = await this.o.transport({
        method,
        url: this.base + p,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? new Uint8Array() : Buffer.from(JSON.stringify(body), 'utf8'),
        timeoutMs: this.o.timeoutMs,
      });
    } catch (err) {
      const t = err instanceof TransportError ? err : undefined;
      const kind = t?.kind ?? 'network';
      throw new KeywardenError(kind, `${kind}: relay ${this.base}: ${(err as Error)?.message ?? String(err)}`, {
        notSent: t ? !t.sent : false,
        cause: err,
      });
    }
    let parsed: unknown;
    try {
      parsed = res.body.byteLength ? JSON.parse(Buffer.from(res.body).toString('utf8')) : undefined;
    } catch {
      parsed = undefined;
    }
    return [res.status, parsed];
  }

  private refused(status: number, parsed: unknown): KeywardenError {
    const detail = (parsed as { detail?: unknown } | undefined)?.detail;
    if (status === 409 && detail === NO_SEATS)
      return new KeywardenError('session_limit', `session_limit: relay has ${NO_SEATS}`, { status, detail });
    return new KeywardenError('server', `server: relay answered ${status} ${String(detail)}`, { status, detail });
  }

  private lease(hwid: string, status: number, parsed: unknown, expect: number): Lease {
    if (status !== expect) throw this.refused(status, parsed);
    const p = (parsed && typeof parsed === 'object' ? parsed : {}) as Record<string, unknown>;
    const pool = verifyPool(p.pool, this.o.keys, this.o.appId, this.o.clock());
    const expiresMs = parseUtcMs(p.expires_at);
    if (!text(p.lease_id) || expiresMs === undefined || p.hwid !== hwid.toLowerCase())
      throw offlineError('malformed', 'relay lease lacks lease_id or expires_at, or names another hwid');
    return { leaseId: p.lease_id, expiresMs, pool };
  }

  async take(hwid: string): Promise<Lease> {
    const [status, parsed] = await this.send('POST', '/relay/v1/leases', { hwid });
    return this.lease(hwid, status, parsed, 201);
  }

  /** The renewed lease, or undefined when the relay no longer knows it (404: expired). */
  async renew(leaseId: string, hwid: string): Promise<Lease | undefined> {
    const [status, parsed] = await this.send('PUT', `/relay/v1/leases/${encodeURIComponent(leaseId)}`);
    return status === 404 ? undefined : this.lease(hwid, status, parsed, 200);
  }

  async release(leaseId: string): Promise<void> {
    const [status, parsed] = await this.send('DELETE', `/relay/v1/leases/${encodeURIComponent(leaseId)}`);
    if (status !== 204 && status !== 404) throw this.refused(status, parsed);
  }
}

type Log = (event: string, fields: Record<string, unknown>) => void;

/**
 * A seat leased from a relay, renewed by a timer at half its remaining time until release()
 * (also on process exit, best effort: see the README). `onLost(error)` runs once when the seat can
 * no longer be kept (the relay forgot it and has none free, or the lease ran out while unreachable).
 */
export class SeatLease {
  leaseId: string;
  pool: SeatPool;
  renewals = 0;
  lost: KeywardenError | undefined;
  private expiresMs: number;
  private timer: NodeJS.Timeout | undefined;
  private released = false;
  private readonly onExit = () => void this.release();

  private constructor(
    private readonly relay: RelayClient,
    readonly hwid: string,
    first: Lease,
    private readonly clock: () => number,
    private readonly log: Log,
    private readonly onLost?: (err: KeywardenError) => void,
  ) {
    this.leaseId = first.leaseId;
    this.pool = first.pool;
    this.expiresMs = first.expiresMs;
    process.once('beforeExit', this.onExit);
    this.schedule();
  }

  static async take(
    url: string,
    hwid: string,
    o: RelayOptions & { log: Log; onLost?: (err: KeywardenError) => void },
  ): Promise<SeatLease> {
    const relay = new RelayClient(url, o);
    return new SeatLease(relay, hwid, await relay.take(hwid), o.clock, o.log, o.onLost);
  }

  get expiresAt(): Date {
    return new Date(this.expiresMs);
  }

  /** True while the lease is held and not past its expiry. */
  get active(): boolean {
    return !this.released && this.lost === undefined && this.clock() < this.expiresMs;
  }

  /** Renews now; a lease the relay forgot is taken again. Throws like the first lease. */
  async renew(): Promise<void> {
    let got = await this.relay.renew(this.leaseId, this.hwid);
    if (!got) {
      this.log('keywarden.relay.lease_gone', { lease: this.leaseId });
      got = await this.relay.take(this.hwid);
    }
    this.leaseId = got.leaseId;
    this.pool = got.pool;
    this.expiresMs = got.expiresMs;
    this.renewals++;
  }

  private schedule(): void {
    if (this.released) return;
    const wait = Math.max(1000, (this.expiresMs - this.clock()) / 2);
    this.timer = setTimeout(() => void this.tick(), wait);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.renew();
    } catch (err) {
      const e = err as KeywardenError;
      const retry = e.code === 'network' || e.code === 'timeout' || e.code === 'server';
      if (!retry || this.clock() >= this.expiresMs) {
        this.lost = e;
        this.log('keywarden.relay.lease_lost', { error: e.message });
        this.onLost?.(e);
        return;
      }
      this.log('keywarden.relay.renew_failed', { error: e.message });
    }
    this.schedule();
  }

  /** Gives the seat back (DELETE); never throws (a relay that cannot be reached lets it expire). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    if (this.timer) clearTimeout(this.timer);
    process.removeListener('beforeExit', this.onExit);
    try {
      await this.relay.release(this.leaseId);
    } catch (err) {
      this.log('keywarden.relay.release_failed', { error: (err as Error).message });
    }
  }
}
