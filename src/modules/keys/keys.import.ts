// Importing existing keys (docs/protocol.md 15.6): rows of the `list` format or of KeyAuth's `licenses`
// table become key records. Pure: rows in, records out; an invalid row is a 422 naming its index.
import { ValidationError } from '../../errors.js';
import type { DurationUnit } from '../../platform/db/entities/index.js';
import { durationDays, durationMs, keyPreview } from './license-keys.js';
import { normalizeHwid } from '../client/index.js';

export const IMPORT_MAX_KEYS = 50_000;
export const IMPORT_BODY_LIMIT = 8 * 1024 * 1024;

const TEXT_MAX = 4096;
const MAX_DURATION_DAYS = 3650;
const UNITS: readonly DurationUnit[] = ['hours', 'days', 'weeks', 'months', 'lifetime'];
const LEVEL_MAX = 2_147_483_647;

export interface ImportedKey {
  key: string;
  preview: string;
  status: 'unused' | 'used' | 'banned';
  level: number;
  durationValue: number;
  durationUnit: DurationUnit;
  durationDays: number;
  note: string;
  usedBy: string;
  hwid: string;
  expiresAt: Date | null;
}

type Row = Record<string, unknown>;

function fail(index: number, field: string, msg: string, type = 'value_error'): never {
  throw new ValidationError([{ loc: ['body', 'keys', index, field], msg: `Row ${index}: ${msg}`, type }]);
}

function text(row: Row, index: number, field: string, max: number, fallback = ''): string {
  const v = row[field];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string') fail(index, field, `${field} must be text`, 'string_type');
  if (v.length > max) fail(index, field, `${field} must be at most ${max} characters`, 'string_too_long');
  return v;
}

function integer(row: Row, index: number, field: string, min: number, max: number): number | undefined {
  let v = row[field];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) v = Number(v.trim());
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    fail(index, field, `${field} must be a whole number from ${min} to ${max}`, 'int_type');
  return v;
}

function keyOf(row: Row, index: number): string {
  const key = row.key;
  if (typeof key !== 'string' || key.trim() === '') fail(index, 'key', 'key is required', 'missing');
  if (key.length > 256) fail(index, 'key', 'key must be at most 256 characters', 'string_too_long');
  return key.trim();
}

function record(key: string, fields: Omit<ImportedKey, 'key' | 'preview' | 'durationDays'>): ImportedKey {
  return {
    key,
    preview: keyPreview(key),
    durationDays: durationDays(fields.durationValue, fields.durationUnit),
    ...fields,
  };
}

/** A `list` row: only `key` is required; no duration means a lifetime key. */
function listRow(row: Row, index: number): ImportedKey {
  const key = keyOf(row, index);
  const unitRaw = row.unit ?? (row.duration === undefined || row.duration === null ? 'lifetime' : 'days');
  if (typeof unitRaw !== 'string' || !UNITS.includes(unitRaw as DurationUnit))
    fail(index, 'unit', `unit must be one of ${UNITS.join(', ')}`, 'literal_error');
  const unit = unitRaw as DurationUnit;
  const duration = integer(row, index, 'duration', 1, 3650 * 24);
  if (unit !== 'lifetime' && duration === undefined)
    fail(index, 'duration', 'duration is required with a unit', 'missing');
  const value = unit === 'lifetime' ? 0 : duration!;
  if (durationDays(value, unit) > MAX_DURATION_DAYS)
    fail(index, 'duration', `duration must be at most ${MAX_DURATION_DAYS} days`, 'less_than_equal');
  const status = row.status ?? 'unused';
  if (status !== 'unused' && status !== 'used' && status !== 'banned')
    fail(index, 'status', 'status must be unused, used or banned', 'literal_error');
  let expiresAt: Date | null = null;
  if (row.expires_at !== undefined && row.expires_at !== null && row.expires_at !== '') {
    const ms = typeof row.expires_at === 'string' ? Date.parse(row.expires_at) : NaN;
    if (Number.isNaN(ms)) fail(index, 'expires_at', 'expires_at must be an ISO date or time', 'date_parsing');
    expiresAt = new Date(ms);
  }
  return record(key, {
    status,
    level: integer(row, index, 'level', 1, LEVEL_MAX) ?? 1,
    durationValue: value,
    durationUnit: unit,
    note: text(row, index, 'note', TEXT_MAX),
    usedBy: text(row, index, 'used_by', 64),
    hwid: normalizeHwid(text(row, index, 'hwid', TEXT_MAX)),
    expiresAt,
  });
}

const KEYAUTH_STATUS: Record<string, ImportedKey['status']> = {
  'Not Used': 'unused',
  Used: 'used',
  Banned: 'banned',
};

/**
 * A KeyAuth `licenses` row: `expires` is the key's length in seconds (whole days become days, else
 * hours rounded up); a used key expires `expires` seconds after `usedon`.
 */
function keyAuthRow(row: Row, index: number): ImportedKey {
  const key = keyOf(row, index);
  const seconds = integer(row, index, 'expires', 1, MAX_DURATION_DAYS * 86_400);
  if (seconds === undefined) fail(index, 'expires', 'expires (seconds) is required', 'missing');
  const [value, unit]: [number, DurationUnit] =
    seconds % 86_400 === 0 ? [seconds / 86_400, 'days'] : [Math.ceil(seconds / 3600), 'hours'];
  const statusText = row.status ?? 'Not Used';
  const status = typeof statusText === 'string' ? KEYAUTH_STATUS[statusText] : undefined;
  if (!status) fail(index, 'status', 'status must be "Not Used", "Used" or "Banned"', 'literal_error');
  const usedOn = integer(row, index, 'usedon', 0, 253_402_300_799);
  const usedBy = text(row, index, 'usedby', 64);
  return record(key, {
    status: status === 'banned' || usedBy === '' ? status : 'used',
    level: integer(row, index, 'level', 1, LEVEL_MAX) ?? 1,
    durationValue: value,
    durationUnit: unit,
    note: text(row, index, 'note', TEXT_MAX),
    usedBy,
    hwid: '',
    expiresAt: usedOn !== undefined && usedBy !== '' ? new Date(usedOn * 1000 + durationMs(value, unit)!) : null,
  });
}

/** Every row read, or a 422 naming the first invalid one. */
export function readImport(format: 'list' | 'keyauth', rows: readonly unknown[]): ImportedKey[] {
  return rows.map((row, index) => {
    if (typeof row !== 'object' || row === null || Array.isArray(row))
      fail(index, 'key', 'each row must be an object', 'dict_type');
    return format === 'list' ? listRow(row as Row, index) : keyAuthRow(row as Row, index);
  });
}
