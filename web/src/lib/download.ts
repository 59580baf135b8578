// Key downloads as files made in the browser (nothing is sent anywhere).
import type { BatchKey } from './history.js';

export function keysTxt(keys: readonly BatchKey[]): string {
  return keys.map((k) => k.key).join('\n') + '\n';
}

const csvCell = (v: string | number | null): string => {
  const s = v === null ? '' : String(v);
  // Quote always; neutralise spreadsheet formulas in free text (note) by a leading apostrophe.
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return `"${safe.replace(/"/g, '""')}"`;
};

export function keysCsv(keys: readonly BatchKey[]): string {
  const rows = [['key', 'level', 'duration', 'unit', 'note'].map(csvCell).join(',')];
  for (const k of keys) rows.push([k.key, k.level, k.duration_value, k.duration_unit, k.note].map(csvCell).join(','));
  return rows.join('\r\n') + '\r\n';
}

/** Saves `text` as a file through a temporary blob: URL. */
export function saveFile(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
