// Artifact files on disk (docs/releases.md "Storage"): ARTIFACT_DIR/<artifact id>, one file per
// artifact row. An upload is written to ARTIFACT_DIR/.incoming/ while its SHA-256 and SHA-512 are
// computed on the way, then renamed into place (a rename within one folder tree is atomic, also on
// the shared storage several hosts mount), so a reader never sees half a file.
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';

interface StoredUpload {
  /** The file under .incoming/ until `place` moves it. */
  temp: string;
  size: number;
  sha256: string;
  sha512: string;
}

export class ArtifactStore {
  private readonly incoming: string;
  private ready: Promise<unknown> | undefined;

  constructor(readonly dir: string) {
    this.incoming = path.join(dir, '.incoming');
  }

  pathOf(artifactId: string): string {
    return path.join(this.dir, artifactId);
  }

  /** Writes the chunks to a temporary file, hashing them; the file is removed when anything fails. */
  async receive(chunks: AsyncIterable<Buffer>): Promise<StoredUpload> {
    await (this.ready ??= mkdir(this.incoming, { recursive: true }));
    const temp = path.join(this.incoming, randomUUID());
    const out = createWriteStream(temp, { flags: 'wx' });
    const h256 = createHash('sha256');
    const h512 = createHash('sha512');
    let size = 0;
    try {
      for await (const chunk of chunks) {
        h256.update(chunk);
        h512.update(chunk);
        size += chunk.byteLength;
        if (!out.write(chunk)) await once(out, 'drain');
      }
      out.end();
      await once(out, 'finish');
    } catch (err) {
      out.destroy();
      await rm(temp, { force: true });
      throw err;
    }
    return { temp, size, sha256: h256.digest('hex'), sha512: h512.digest('hex') };
  }

  async place(upload: StoredUpload, artifactId: string): Promise<void> {
    await rename(upload.temp, this.pathOf(artifactId));
  }

  async discard(fileOrId: string): Promise<void> {
    await rm(path.isAbsolute(fileOrId) ? fileOrId : this.pathOf(fileOrId), { force: true });
  }
}
