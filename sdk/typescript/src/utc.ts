// Strict ISO 8601 UTC times as docs/protocol.md 1 writes them (2026-11-21T22:00:00.000Z): the form in which
// offline license files and grace_until carry their times. Same rule in every SDK: date, T, time, an
// optional fraction of 1-9 digits (cut to milliseconds), then Z; nothing else (Date.parse would take
// far more).
const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;

/** Unix milliseconds of a strict ISO 8601 UTC string, else undefined (also for any non-string). */
export function parseUtcMs(value: unknown): number | undefined {
  const m = typeof value === 'string' ? ISO.exec(value) : null;
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return undefined;
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  // Date.UTC rolls 31 April over into May: such a date does not exist.
  if (new Date(ms).getUTCDate() !== d) return undefined;
  return ms + Number((m[7] ?? '').padEnd(3, '0').slice(0, 3));
}
