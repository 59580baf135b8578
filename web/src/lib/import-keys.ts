// Reading pasted or picked text into the body of an import (docs/protocol.md 15.6). Three shapes are
// recognised: KeyAuth's `licenses` table exported as JSON (rows with `expires`, `usedby`...), a
// JSON list (key strings or `list` rows), a CSV with a header naming the `list` columns (the
// generator's .csv download is one), and otherwise a plain list with one key per line. The server
// checks every row; this only shapes them, so its 422 names the row the user sees here.

export type ImportFormat = 'list' | 'keyauth';

export interface ImportBody {
  format: ImportFormat;
  keys: Record<string, unknown>[];
}

export interface ParsedImport {
  body: ImportBody;
  /** What the text was read as, for the preview. */
  kind: 'keyauth-json' | 'json' | 'csv' | 'lines';
}

/** The `list` columns a CSV header may name (docs/protocol.md 15.6); others are ignored. */
export const LIST_COLUMNS = [
  'key',
  'duration',
  'unit',
  'level',
  'note',
  'status',
  'used_by',
  'hwid',
  'expires_at',
] as const;

/** Columns of our own CSV files under another name: the export's and the generator's. */
const COLUMN_ALIASES: Record<string, string> = {
  duration_value: 'duration',
  duration_unit: 'unit',
  usedby: 'used_by',
  license: 'key',
};

/** Fields only KeyAuth's rows have. */
const KEYAUTH_FIELDS = ['expires', 'usedby', 'usedon', 'genby', 'gendate'];

export class ImportParseError extends Error {}

/** RFC 4180 CSV: quoted cells with "" for a quote, CRLF or LF rows. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else cell += ch;
    } else if (ch === '"' && cell === '') quoted = true;
    else if (ch === ',') {
      row.push(cell);
      cell = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell !== '' || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  return rows.filter((r) => r.some((c) => c.trim() !== ''));
}

function isKeyAuthRow(r: unknown): boolean {
  return typeof r === 'object' && r !== null && KEYAUTH_FIELDS.some((f) => f in r);
}

function fromJson(data: unknown): ParsedImport {
  // KeyAuth's export may wrap the table: {"licenses": [...]}.
  const rows =
    Array.isArray(data) || typeof data !== 'object' || data === null
      ? data
      : ((data as Record<string, unknown>).licenses ?? (data as Record<string, unknown>).keys);
  if (!Array.isArray(rows) || rows.length === 0)
    throw new ImportParseError('The JSON holds no rows: expected a list of keys or of KeyAuth license rows.');
  if (rows.some(isKeyAuthRow))
    return { kind: 'keyauth-json', body: { format: 'keyauth', keys: rows as Record<string, unknown>[] } };
  // Plain strings are keys; objects go as they are (the server names an invalid one).
  const keys = rows.map((r) => (typeof r === 'string' ? { key: r } : (r as Record<string, unknown>)));
  return { kind: 'json', body: { format: 'list', keys } };
}

function fromCsv(rows: string[][]): ParsedImport {
  const header = rows[0]!.map((h) => {
    const name = h.trim().toLowerCase();
    return COLUMN_ALIASES[name] ?? name;
  });
  const keys = rows.slice(1).map((cells) => {
    const row: Record<string, unknown> = {};
    header.forEach((name, i) => {
      const v = (cells[i] ?? '').trim();
      if (v !== '' && (LIST_COLUMNS as readonly string[]).includes(name)) row[name] = v;
    });
    // A lifetime key has no duration (the generator's CSV writes 0 there).
    if (row.unit === 'lifetime') delete row.duration;
    return row;
  });
  if (keys.length === 0) throw new ImportParseError('The CSV has a header row but no keys.');
  return { kind: 'csv', body: { format: 'list', keys } };
}

/** The import body for a text, or an ImportParseError saying why it cannot be read. */
export function parseImport(text: string): ParsedImport {
  const trimmed = text.replace(/^\uFEFF/, '').trim();
  if (trimmed === '') throw new ImportParseError('Paste keys or choose a file first.');
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    let data: unknown;
    try {
      data = JSON.parse(trimmed);
    } catch {
      throw new ImportParseError('This looks like JSON but cannot be read as JSON.');
    }
    return fromJson(data);
  }
  const firstLine = trimmed.split(/\r?\n/, 1)[0]!;
  if (firstLine.includes(',')) {
    const rows = parseCsv(trimmed);
    const header = rows[0]!.map((h) => COLUMN_ALIASES[h.trim().toLowerCase()] ?? h.trim().toLowerCase());
    if (!header.includes('key'))
      throw new ImportParseError(
        `A CSV needs a header row with a "key" column (and any of ${LIST_COLUMNS.slice(1).join(', ')}).`,
      );
    return fromCsv(rows);
  }
  const keys = trimmed
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((key) => ({ key }));
  return { kind: 'lines', body: { format: 'list', keys } };
}

/** `keys.12.level` (the 422's field path) -> the row's index and field. */
export function rowOfIssue(path: string): { index: number; field: string } | null {
  const m = /^keys\.(\d+)(?:\.(.+))?$/.exec(path);
  return m ? { index: Number(m[1]), field: m[2] ?? 'key' } : null;
}
