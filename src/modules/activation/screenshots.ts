// Activation screenshots (docs/spec.md register/login/license `screenshot`, docs/protocol.md 11.27): PNG, JPEG or
// WebP (told by their first bytes) of at most 3 MiB decoded, stored under DATA_DIR by content:
// `screenshots/<app id>/<sha256>.<ext>`, so an identical image is written once however often it
// is sent. Each key or end user keeps its newest SCREENSHOTS_PER_OWNER; the whole store is bounded
// by SCREENSHOT_STORE_MB, the least recently sent images removed first. A path a key, user or log
// line still names after its image was removed simply has no file any more.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { validationError } from '../../errors.js';
import { randomHex, sha256Hex } from '../../platform/crypto/index.js';
import type { ScreenshotRepository } from './screenshot.repository.js';

const SCREENSHOT_MAX_BYTES = 3 * 1024 * 1024;
const SCREENSHOTS_PER_OWNER = 20;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The image type by its magic number, or undefined for anything else. */
function imageType(buf: Buffer): 'png' | 'jpg' | 'webp' | undefined {
  if (buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return 'jpg';
  if (buf.subarray(0, 4).toString('latin1') === 'RIFF' && buf.subarray(8, 12).toString('latin1') === 'WEBP')
    return 'webp';
  return undefined;
}

export interface Image {
  bytes: Buffer;
  ext: string;
  sha256: string;
}

export class ScreenshotStore {
  constructor(
    private readonly dataDir: string,
    private readonly repo: ScreenshotRepository,
    private readonly log: Logger,
    /** SCREENSHOT_STORE_MB in bytes. */
    private readonly limitBytes: number,
    private readonly now: () => number,
  ) {}

  /** Checks the field before anything is written: 422 on bad base64, size or image type. */
  decode(b64: string | undefined): Image | undefined {
    if (b64 === undefined || b64 === '') return undefined;
    const clean = b64.replace(/^data:image\/[a-z]+;base64,/, '').replace(/\s+/g, '');
    if (!BASE64.test(clean)) throw validationError('screenshot', 'Screenshot must be base64', 'value_error');
    if (Math.floor((clean.length * 3) / 4) > SCREENSHOT_MAX_BYTES + 2)
      throw validationError('screenshot', 'Screenshot is larger than 3 MiB', 'too_long');
    const bytes = Buffer.from(clean, 'base64');
    if (bytes.byteLength > SCREENSHOT_MAX_BYTES)
      throw validationError('screenshot', 'Screenshot is larger than 3 MiB', 'too_long');
    const ext = imageType(bytes);
    if (!ext) throw validationError('screenshot', 'Screenshot must be a PNG, JPEG or WebP image', 'value_error');
    return { bytes, ext, sha256: sha256Hex(bytes) };
  }

  /** Stores the image for its owners (a key, a user, or both); returns its DATA_DIR-relative path. */
  async save(appId: string, ownerIds: readonly string[], image: Image): Promise<string> {
    const rel = path.posix.join('screenshots', appId, `${image.sha256}.${image.ext}`);
    const abs = path.join(this.dataDir, rel);
    if (!(await exists(abs))) {
      await fs.mkdir(path.dirname(abs), { recursive: true });
      // Written aside and renamed: a crash never leaves a half image under the content's name.
      const tmp = `${abs}.${randomHex(6)}.tmp`;
      await fs.writeFile(tmp, image.bytes, { mode: 0o640 });
      await fs.rename(tmp, abs);
    }
    const at = new Date(this.now());
    for (const owner of ownerIds)
      await this.repo.keep(owner, appId, image.sha256, image.ext, image.bytes.byteLength, at);
    const unreferenced = [
      ...(await this.repo.trimOwners(ownerIds, SCREENSHOTS_PER_OWNER)),
      ...(await this.repo.evictBeyond(this.limitBytes)),
    ];
    for (const f of unreferenced) {
      if (f.sha256 === image.sha256 && f.appId === appId) continue;
      await fs.rm(path.join(this.dataDir, 'screenshots', f.appId, `${f.sha256}.${f.ext}`), { force: true });
    }
    if (unreferenced.length > 0) this.log.debug({ removed: unreferenced.length }, 'screenshots.removed');
    return rel;
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}
