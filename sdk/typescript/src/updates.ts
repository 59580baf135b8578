// Updates: the upgrade check's offer and the verified download of an artifact. An offer is believed
// only when every artifact carries an Ed25519 signature, by a pinned response-signing key, over
// `kwart1.<app_id>.<version>.<filename>.<sha512 hex>` (the server's docs/releases.md "Artifacts";
// sdk/vectors/artifacts.json fixes the order of the checks). A download streams into a temporary
// file next to the target, checks size, SHA-512 and that signature, and only then renames it over
// the target; any failure removes the temporary file and throws an UpdateError.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { decodeSignature, ed25519Verify } from './crypto.js';
import { KeywardenError, type ErrorCode, type UpdateReason } from './errors.js';
import type { PinnedKeys } from './verify.js';

/**
 * An update refused: a KeywardenError whose `reason` is an UpdateReason. `code` is `verification` for
 * unknown_kid, bad_signature, size_mismatch and sha512_mismatch; for download_failed `server` (the
 * link's `status` and `detail` kept), `network` or `timeout`.
 */
export class UpdateError extends KeywardenError {
  declare readonly reason: UpdateReason;
  constructor(
    reason: UpdateReason,
    message: string,
    init: { code?: ErrorCode; status?: number; detail?: unknown; cause?: unknown } = {},
  ) {
    super(init.code ?? 'verification', `update refused (${reason}): ${message}`, { ...init, reason });
    this.name = 'UpdateError';
  }
}

/** One file of an offered release, its signature already verified. */
export interface Artifact {
  appId: string;
  /** The release's version (part of the signed message). */
  version: string;
  filename: string;
  platform: string;
  arch: string;
  size: number;
  sha512: string;
  signature: string;
  kid: string;
  url: string;
  urlExpiresAt: Date | null;
}

export interface UpdateOffer {
  version: string;
  channel: string;
  notes: string;
  publishedAt: Date | null;
  artifacts: Artifact[];
}

/** Called after every chunk written. */
export type ProgressCallback = (received: number, total: number) => void;

export function artifactMessage(appId: string, version: string, filename: string, sha512Hex: string): string {
  return `kwart1.${appId}.${version}.${filename}.${sha512Hex}`;
}

/** Throws UpdateError `unknown_kid` or `bad_signature` unless the artifact's signature holds. */
export function verifyArtifact(
  keys: PinnedKeys,
  a: Omit<Artifact, 'url' | 'urlExpiresAt' | 'platform' | 'arch'>,
): void {
  const key = keys.get(a.kid);
  if (!key) throw new UpdateError('unknown_kid', `${a.filename} is signed by unpinned key ${JSON.stringify(a.kid)}`);
  const sig = decodeSignature(a.signature);
  if (!sig || !ed25519Verify(key, artifactMessage(a.appId, a.version, a.filename, a.sha512), sig))
    throw new UpdateError('bad_signature', `signature of ${a.filename} ${a.version} does not verify`);
}

/** The offer of an upgrade answer, every artifact's signature checked; TypeError when a field is malformed. */
export function parseOffer(
  upgrade: Record<string, unknown>,
  appId: string,
  keys: PinnedKeys,
  toDate: (v: unknown) => Date | null,
): UpdateOffer {
  const text = (o: Record<string, unknown>, name: string): string => {
    const v = o[name];
    if (typeof v !== 'string' || v === '') throw new TypeError(`upgrade answer lacks ${name}`);
    return v;
  };
  const version = text(upgrade, 'version');
  const listed = upgrade.artifacts;
  if (!Array.isArray(listed) || listed.length === 0) throw new TypeError('upgrade answer lists no artifacts');
  const artifacts = listed.map((raw: unknown): Artifact => {
    if (raw === null || typeof raw !== 'object') throw new TypeError('an artifact is not an object');
    const o = raw as Record<string, unknown>;
    if (typeof o.size !== 'number' || !Number.isSafeInteger(o.size) || o.size < 0)
      throw new TypeError('artifact size is not a count of bytes');
    const a: Artifact = {
      appId,
      version,
      filename: text(o, 'filename'),
      platform: text(o, 'platform'),
      arch: text(o, 'arch'),
      size: o.size,
      sha512: text(o, 'sha512'),
      signature: text(o, 'signature'),
      kid: text(o, 'kid'),
      url: text(o, 'url'),
      urlExpiresAt: toDate(o.url_expires_at),
    };
    verifyArtifact(keys, a);
    return a;
  });
  return {
    version,
    channel: typeof upgrade.channel === 'string' ? upgrade.channel : '',
    notes: typeof upgrade.notes === 'string' ? upgrade.notes : '',
    publishedAt: toDate(upgrade.published_at),
    artifacts,
  };
}

function detailOf(raw: Buffer): unknown {
  try {
    const v = JSON.parse(raw.toString('utf8')) as unknown;
    return v !== null && typeof v === 'object' && 'detail' in v ? (v as { detail: unknown }).detail : v;
  } catch {
    return raw.toString('utf8');
  }
}

/** GET `url`, resolving with the response once its head arrived; `timeoutMs` bounds connect and each idle gap. */
function get(url: string, timeoutMs: number): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const mod = target.protocol === 'https:' ? https : target.protocol === 'http:' ? http : undefined;
    if (!mod) return reject(new UpdateError('download_failed', `unsupported URL ${url}`, { code: 'network' }));
    const req = mod.get(target, { agent: false, headers: { accept: 'application/octet-stream' } }, resolve);
    req.setTimeout(timeoutMs, () =>
      req.destroy(new UpdateError('download_failed', `no data within ${timeoutMs} ms`, { code: 'timeout' })),
    );
    req.on('error', (err) =>
      reject(
        err instanceof UpdateError
          ? err
          : new UpdateError('download_failed', `GET failed: ${err.message}`, { code: 'network', cause: err }),
      ),
    );
  });
}

/**
 * Streams `a.url` into a temporary file beside `target`, verifies it, renames it into place and
 * returns the target's absolute path. Holds one chunk at a time in memory.
 */
export async function downloadArtifact(
  keys: PinnedKeys,
  a: Artifact,
  target: string,
  progress: ProgressCallback | undefined,
  timeoutMs: number,
): Promise<string> {
  verifyArtifact(keys, a);
  const dest = path.resolve(target);
  const tmp = path.join(path.dirname(dest), `.${path.basename(dest)}.${randomBytes(6).toString('hex')}.part`);
  let out: fs.promises.FileHandle | undefined;
  try {
    out = await fs.promises.open(tmp, 'wx', 0o644);
    const res = await get(a.url, timeoutMs);
    if (res.statusCode !== 200) {
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const c of res as AsyncIterable<Buffer>) {
        if (n < 4096) chunks.push(c);
        n += c.length;
      }
      const detail = detailOf(Buffer.concat(chunks).subarray(0, 4096));
      throw new UpdateError('download_failed', `${a.filename}: ${res.statusCode} ${JSON.stringify(detail)}`, {
        code: 'server',
        status: res.statusCode,
        detail,
      });
    }
    const digest = createHash('sha512');
    let received = 0;
    try {
      for await (const c of res as AsyncIterable<Buffer>) {
        received += c.length;
        if (received > a.size) {
          res.destroy();
          throw new UpdateError('size_mismatch', `${a.filename}: more than the offered ${a.size} bytes`);
        }
        digest.update(c);
        await out.write(c);
        progress?.(received, a.size);
      }
    } catch (err) {
      if (err instanceof UpdateError) throw err;
      throw new UpdateError('download_failed', `reading ${a.filename}: ${(err as Error).message}`, {
        code: 'network',
        cause: err,
      });
    }
    await out.sync();
    await out.close();
    out = undefined;
    if (received !== a.size)
      throw new UpdateError('size_mismatch', `${a.filename}: ${received} bytes, offered ${a.size}`);
    const got = digest.digest();
    const want = Buffer.from(a.sha512, 'hex');
    if (want.length !== got.length || !timingSafeEqual(got, want))
      throw new UpdateError('sha512_mismatch', `${a.filename}: SHA-512 differs from the offer`);
    await fs.promises.rename(tmp, dest);
    return dest;
  } catch (err) {
    await out?.close().catch(() => undefined);
    await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
    if (err instanceof KeywardenError) throw err;
    throw new UpdateError('download_failed', `writing ${dest}: ${(err as Error).message}`, {
      code: 'network',
      cause: err,
    });
  }
}
