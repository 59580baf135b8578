// Files answered from disk (docs/releases.md "Downloads"): one byte range at most (206), the ETag the
// caller names, and the bytes read in chunks and written with tryEnd, waiting on onWritable while the
// client is behind, so a large file never sits in memory and a slow client costs one chunk.
import { open } from 'node:fs/promises';
import { STATUS_CODES } from 'node:http';
import type { Logger } from 'pino';
import type * as UwsTypes from 'uWebSockets.js';
import { AppError } from '../../errors.js';
import type { IncomingRequest, Reply } from './types.js';

/** Bytes read from disk and handed to uWS at a time. */
const CHUNK = 256 * 1024;

export interface FileBody {
  path: string;
  /** First byte sent, and how many. */
  start: number;
  length: number;
}

interface FileFacts {
  path: string;
  size: number;
  /** Quoted by this function; a strong validator (the content's hash). */
  etag: string;
  contentType?: string;
  /** Offered as the download's name. */
  filename?: string;
}

const RANGE = /^bytes=(\d*)-(\d*)$/;

/**
 * The reply for a GET of a file: 200 with the whole file, or 206 with the one range asked (an
 * `If-Range` naming another version, or several ranges, get the whole file); 416 when the range lies
 * outside the file. Content-Length is written by the transport from `length`.
 */
export function fileReply(req: IncomingRequest, f: FileFacts): Reply {
  const etag = `"${f.etag}"`;
  const headers: Record<string, string> = {
    'Content-Type': f.contentType ?? 'application/octet-stream',
    ETag: etag,
    'Accept-Ranges': 'bytes',
    ...(f.filename ? { 'Content-Disposition': `attachment; filename="${f.filename}"` } : {}),
  };
  const whole: Reply = { status: 200, body: '', headers, file: { path: f.path, start: 0, length: f.size } };
  const range = req.headers['range'];
  const ifRange = req.headers['if-range'];
  if (range === undefined || (ifRange !== undefined && ifRange !== etag)) return whole;
  const m = RANGE.exec(range.trim());
  if (!m || (m[1] === '' && m[2] === '')) return whole; // several ranges, or a unit we do not serve
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    start = Math.max(0, f.size - suffix);
    end = f.size - 1;
    if (suffix === 0) start = f.size; // nothing to send: unsatisfiable
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? f.size - 1 : Math.min(Number(m[2]), f.size - 1);
  }
  if (start >= f.size || end < start)
    throw new AppError('range_not_satisfiable', undefined, { 'Content-Range': `bytes */${f.size}` });
  return {
    status: 206,
    body: '',
    headers: { ...headers, 'Content-Range': `bytes ${start}-${end}/${f.size}` },
    file: { path: f.path, start, length: end - start + 1 },
  };
}

/** A response's abort state as the transport keeps it. */
interface Aborted {
  v: boolean;
  wake?: (() => void) | undefined;
}

/**
 * Writes `reply.file`: status and headers with the first chunk, then chunk after chunk with tryEnd.
 * When tryEnd could not take a whole chunk, the rest of it is offered again from onWritable (at the
 * offset uWS reports) before the next read. An abort stops the loop; the file is always closed. A
 * failure after the headers closes the connection: the client sees a short body, never a whole one.
 */
export async function pumpFile(res: UwsTypes.HttpResponse, aborted: Aborted, reply: Reply, log: Logger): Promise<void> {
  const f = reply.file!;
  const head = () => {
    res.writeStatus(`${reply.status} ${STATUS_CODES[reply.status] ?? 'Unknown'}`);
    for (const name in reply.headers) res.writeHeader(name, reply.headers[name]!);
  };
  const fh = await open(f.path, 'r').catch((err: unknown) => {
    log.error({ err, path: f.path }, 'http.file_missing');
    return undefined;
  });
  if (aborted.v) return void (await fh?.close());
  if (!fh) {
    res.cork(() =>
      res
        .writeStatus('500 Internal Server Error')
        .writeHeader('Content-Type', 'application/json')
        .end('{"detail":"Internal server error"}', true),
    );
    return;
  }
  try {
    if (f.length === 0) {
      res.cork(() => {
        head();
        res.end();
      });
      return;
    }
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, f.length));
    let sent = 0;
    let first = true;
    while (sent < f.length) {
      const want = Math.min(buf.length, f.length - sent);
      const { bytesRead } = await fh.read(buf, 0, want, f.start + sent);
      if (aborted.v) return;
      if (bytesRead === 0) throw new Error('file shorter than its record');
      const chunk = buf.subarray(0, bytesRead);
      sent += bytesRead;
      let ok = false;
      let done = false;
      let base = 0;
      res.cork(() => {
        if (first) head();
        first = false;
        base = res.getWriteOffset();
        [ok, done] = res.tryEnd(chunk, f.length);
      });
      if (done) return;
      if (!ok) {
        // Not all of it was taken: the rest goes when the client has drained.
        await new Promise<void>((resolve) => {
          aborted.wake = resolve;
          res.onWritable((offset) => {
            const [more, finished] = res.tryEnd(chunk.subarray(offset - base), f.length);
            if (more || finished) {
              aborted.wake = undefined;
              resolve();
            }
            return more;
          });
        });
        if (aborted.v) return;
      }
    }
  } catch (err) {
    log.error({ err, path: f.path }, 'http.file_failed');
    if (!aborted.v) res.close();
  } finally {
    await fh.close();
  }
}
