// Activation screenshots (SPEC register/login/license `screenshot`): base64 image data written
// under DATA_DIR/screenshots/<app id>/, referenced by a path relative to DATA_DIR.
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { validationError } from '../errors.js';

export const SCREENSHOT_MAX_BYTES = 3 * 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Magic numbers of the image types kept; anything else is stored as .bin. */
function extension(buf: Buffer): string {
  if (buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (buf[0] === 0xff && buf[1] === 0xd8) return 'jpg';
  if (buf.subarray(0, 4).toString('latin1') === 'RIFF' && buf.subarray(8, 12).toString('latin1') === 'WEBP')
    return 'webp';
  return 'bin';
}

export class ScreenshotStore {
  constructor(private readonly dataDir: string) {}

  /** Checks the field before anything is written (422 on bad base64 or size). */
  decode(b64: string | undefined): Buffer | undefined {
    if (b64 === undefined || b64 === '') return undefined;
    const clean = b64.replace(/^data:image\/[a-z]+;base64,/, '').replace(/\s+/g, '');
    if (!BASE64.test(clean)) throw validationError('screenshot', 'Screenshot must be base64', 'value_error');
    const buf = Buffer.from(clean, 'base64');
    if (buf.byteLength > SCREENSHOT_MAX_BYTES)
      throw validationError('screenshot', 'Screenshot is larger than 3 MiB', 'too_long');
    return buf;
  }

  async save(appId: string, image: Buffer): Promise<string> {
    const rel = path.posix.join('screenshots', appId, `${randomUUID()}.${extension(image)}`);
    const abs = path.join(this.dataDir, rel);
    await fs.mkdir(path.dirname(abs), { recursive: true });
    await fs.writeFile(abs, image, { mode: 0o640 });
    return rel;
  }
}
