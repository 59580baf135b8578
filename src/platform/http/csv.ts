// CSV exports (RFC 4180): one line per record, CRLF, every cell quoted; a cell that a spreadsheet
// would run as a formula (=, +, -, @, tab, CR first) gets a leading apostrophe. Streamed page by page.
import { streamReply, type Reply } from './types.js';

function cell(v: unknown): string {
  let s: string;
  if (v === null || v === undefined) s = '';
  else if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  else if (Array.isArray(v)) s = v.join(' ');
  else if (typeof v === 'object') s = JSON.stringify(v);
  else s = String(v as string);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return `"${s.replace(/"/g, '""')}"`;
}

function line(cells: readonly unknown[]): string {
  return `${cells.map(cell).join(',')}\r\n`;
}

/**
 * A streamed `text/csv` download: the header row, then each page of rows as one chunk. The first page
 * is read before anything is sent, so a refusal (permission, bad filter) is still an ordinary error reply.
 */
export async function csvReply(
  fileName: string,
  header: readonly string[],
  pages: AsyncIterator<readonly (readonly unknown[])[]>,
): Promise<Reply> {
  const first = await pages.next();
  async function* body(): AsyncGenerator<string> {
    try {
      yield line(header);
      for (let page = first; !page.done; page = await pages.next()) {
        if (page.value.length > 0) yield page.value.map(line).join('');
      }
    } finally {
      await pages.return?.();
    }
  }
  return streamReply(body(), {
    'Content-Type': 'text/csv; charset=utf-8',
    'Content-Disposition': `attachment; filename="${fileName}"`,
    'Cache-Control': 'no-store',
  });
}
